"""What the app's process and the engine process share about an engine: its errors, the generation
parameters and statistics, and the reports of a load and a resize. Importing it loads no llama.cpp."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.errors import VramchatError
from app.limits import DEFAULT_MAX_TOKENS

if TYPE_CHECKING:  # the reports' field types: the picker's start, which imports GenerationParams, needs none
    from app.devices.process import ProcessMemory
    from app.engine.llama_log import Measurements
    from planner.config import LoadConfig


class EngineError(VramchatError, RuntimeError):
    """Loading or running the model failed; the message says why in a user's words.

    `log` keeps llama.cpp's error lines and `status` llama_decode's return value, so that
    `app.engine.failure.classify` can tell a memory failure (worth a smaller plan) from the rest.
    """

    title = "llama.cpp failed"

    def __init__(self, message: str, log: Iterable[str] = (), status: int | None = None) -> None:
        super().__init__(message)
        self.log = list(log)
        self.status = status


# a generated token's text (bytes: a token may hold part of a character), log-probability under the model's
# own distribution, and the likeliest tokens' (text, log-probability) at that step
TokenLogprob = tuple[bytes, float, tuple[tuple[bytes, float], ...]]


@dataclass(frozen=True)
class GenerationParams:
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    seed: int = -1
    stop: tuple[str, ...] = ()
    # OpenAI's penalties (0: off), over the same last `repeat_last_n` tokens: a token's logit lowers by
    # `frequency_penalty` for each time it appeared there, and by `presence_penalty` once if it did
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    # a GBNF grammar (root rule `root`) the reply must follow, '' for none: a forced tool call, a JSON reply
    grammar: str = ""
    # (token id, bias) added to the token's logit before any other sampler (OpenAI's logit_bias); -inf bans it
    logit_bias: tuple[tuple[int, float], ...] = ()
    # each generated token's log-probability and this many of the likeliest tokens beside it (OpenAI's
    # logprobs / top_logprobs) in GenerationStats.logprobs; -1: none
    top_logprobs: int = -1


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    reused_tokens: int = 0
    generated_tokens: int = 0
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0
    stopped_by: str = ""  # eos, stop, length, user, error, context
    generation_started: float = 0.0  # time.perf_counter() when the first token was sampled
    # while a long prompt is read: tokens read so far (of prompt_tokens - reused_tokens), and when it began
    prompt_read: int = 0
    prompt_started: float = 0.0
    # with GenerationParams.top_logprobs: each generated token's (text, log-probability, the likeliest tokens'
    # (text, log-probability)), in order (app.engine.logprobs)
    logprobs: list[TokenLogprob] = field(default_factory=list)

    def reading_prompt(self) -> tuple[int, int, float] | None:
        """While the prompt is being read: (tokens read, tokens to read, tokens a second); else None."""
        if self.generation_started or not self.prompt_started:
            return None
        total = self.prompt_tokens - self.reused_tokens
        elapsed = time.perf_counter() - self.prompt_started
        return self.prompt_read, total, (self.prompt_read / elapsed if elapsed > 0 else 0.0)

    def live_tokens_per_second(self) -> float:
        """Generation speed so far, while the reply is still streaming."""
        if not self.generation_started or not self.generated_tokens:
            return 0.0
        elapsed = self.generation_seconds or (time.perf_counter() - self.generation_started)
        return self.generated_tokens / elapsed if elapsed > 0 else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.generation_seconds if self.generation_seconds > 0 else 0.0

    @property
    def prompt_tokens_per_second(self) -> float:
        evaluated = self.prompt_tokens - self.reused_tokens
        return evaluated / self.prompt_seconds if self.prompt_seconds > 0 else 0.0


@dataclass(frozen=True)
class PromptProgress:
    """What the engine says while it reads a prompt, as it says it: `read` of `total` tokens so far, at
    `tokens_per_second` (GenerationStats.reading_prompt), or, while a picture goes through the projector,
    `picture`: its place and how many there are."""

    read: int = 0
    total: int = 0
    tokens_per_second: float = 0.0
    picture: tuple[int, int] | None = None


@dataclass(frozen=True)
class ResizeReport:
    """A context made larger or smaller: its size now, what it took, what it carried over."""

    n_ctx: int
    seconds: float
    kept_tokens: int
    state_bytes: int


@dataclass(frozen=True)
class ProjectorLoad:
    """A vision (or audio) projector to load beside the model with libmtmd, as the plan placed it."""

    path: str
    use_gpu: bool  # the plan put it on the first GPU (libmtmd's choice when it may use one), else the CPU
    flash_attn: bool
    image_max_tokens: int | None = None  # None: the projector's own limit
    # the text that stands for one image or sound in a prompt; unlikely in what people write, so that a
    # user's own words are never taken for one (llama-server draws a random one the same way)
    marker: str = "<__vramchat_media__>"


@dataclass(frozen=True)
class Media:
    """One image (its pixels as RGB bytes, width x height) or one sound file (its bytes, which libmtmd
    decodes: WAV, MP3, FLAC), named by the SHA-256 of the file it came from."""

    id: str
    kind: str  # "image" or "audio"
    data: bytes  # b"" when only its key is at hand: the engine process already holds the bytes
    width: int = 0
    height: int = 0
    # where the bytes come from when `data` is empty (the app's side only: never sent to the child)
    reader: Callable[[], bytes] | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> tuple[str, str, int, int]:
        """What names these exact bytes: the file's SHA-256, and the size its pixels were scaled to."""
        return (self.id, self.kind, self.width, self.height)

    def payload(self) -> bytes:
        """The pixels (or the sound), read from the reader when they are not at hand."""
        if self.data or self.reader is None:
            return self.data
        return self.reader()

    def sent(self, with_data: bool) -> Media:
        """What crosses the socket: the bytes, or the key alone (the reader stays on this side)."""
        return Media(self.id, self.kind, self.payload() if with_data else b"", self.width, self.height)


@dataclass(frozen=True)
class MediaPrompt:
    """A prompt with images or sounds in it: the text holds the projector's marker once for each item of
    `media`, in order."""

    text: str
    media: tuple[Media, ...] = ()


Prompt = list[int] | str | MediaPrompt  # tokens, text, or text with pictures
PromptWatcher = Callable[[PromptProgress], None]  # told each PromptProgress as the engine says it


@dataclass(frozen=True)
class MediaEncoded:
    """An image (or sound) went through the projector: how many tokens it became, in how long."""

    id: str
    index: int  # its place among the prompt's media still to encode (0-based)
    count: int  # how many are encoded for this prompt
    tokens: int
    seconds: float


@dataclass(frozen=True)
class ProjectorInfo:
    """The projector a load put beside the model."""

    path: str
    vision: bool
    audio: bool
    marker: str
    seconds: float  # loading it, its warmup included


@dataclass
class LoadReport:
    path: str
    config: LoadConfig
    seconds: float
    measurements: Measurements
    n_ctx: int
    n_vocab: int
    chat_template: str | None
    log_tail: list[str] = field(default_factory=list)
    # the process as psutil / NVML / llama.cpp's devices saw it just before and just after the load
    process_before: ProcessMemory | None = None
    process: ProcessMemory | None = None
    projector: ProjectorInfo | None = None
    # the model's fill-in-the-middle tokens (prefix, suffix, middle) as llama.cpp's vocabulary names them (from
    # the header's keys, or found by their text); None when it has not all three
    fim_tokens: tuple[int, int, int] | None = None

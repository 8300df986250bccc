"""What a reply is sampled with: `reply_sampling`, the one rule for the chat, `-p` and the server, over
a chat's own sampling (`ChatSampling`), kept with the chat (the store's `settings` JSON; its system prompt
has a column of its own), which nothing another chat or model inherits.

A value left unset (None) is the model's own: the GGUF's `general.sampling.*` key where the file carries
one, else vramchat's default (this module's `temperature_for`, the engine's for the rest). Presets set
a few values at once. `thinking` is the chat's switch for templates that take `enable_thinking` (None:
the template's own default); it is only kept here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from app.conversation.templates import ChatFormat
from app.engine.types import GenerationParams
from app.limits import DEFAULT_MAX_TOKENS, INTEGERS, RANGES, checked

# the GGUF keys a model file may carry its authors' sampling in, by the field they set
GGUF_KEYS = {
    "temperature": "general.sampling.temp",
    "top_p": "general.sampling.top_p",
    "top_k": "general.sampling.top_k",
    "min_p": "general.sampling.min_p",
    "repeat_penalty": "general.sampling.penalty_repeat",
}

# what a user may type for each (the slash commands: /temp 0.7, /top-p 0.9 ...)
ALIASES = {
    "temp": "temperature",
    "top-p": "top_p",
    "topp": "top_p",
    "top-k": "top_k",
    "topk": "top_k",
    "min-p": "min_p",
    "minp": "min_p",
    "repeat": "repeat_penalty",
    "repeat-penalty": "repeat_penalty",
    "max": "max_tokens",
    "max-tokens": "max_tokens",
}


@dataclass(frozen=True)
class ChatSampling:
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    thinking: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The values set (the unset ones are the model's own and are not written)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ChatSampling:
        """From the store; a value of the wrong kind or out of range is left unset (never an error)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = raw.get(f.name)
            if f.name == "thinking":
                values[f.name] = value if isinstance(value, bool) else None
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                try:
                    values[f.name] = checked(f.name, value)
                except ValueError:
                    values[f.name] = None
        return cls(**values)

    def set(self, name: str, value: float | int | bool | None) -> ChatSampling:
        """This sampling with one value changed (None: back to the model's own); a bad value raises ValueError."""
        name = field_name(name)
        values: dict[str, Any] = {name: value if name == "thinking" or value is None else checked(name, value)}
        return replace(self, **values)

    def changed(self) -> list[str]:
        """The values this chat sets, in words ("temp 0.7", "seed 42")."""
        short = {"temperature": "temp", "repeat_penalty": "repeat", "max_tokens": "max"}
        out = [f"{short.get(k, k.replace('_', '-'))} {v:g}" for k, v in self.to_json().items() if k != "thinking"]
        if self.thinking is not None:
            out.append("thinking on" if self.thinking else "thinking off")
        return out


PRESETS: dict[str, ChatSampling] = {
    "default": ChatSampling(),  # the model's own
    "precise": ChatSampling(temperature=0.2, top_p=0.9, top_k=20, min_p=0.05, repeat_penalty=1.05),
    "balanced": ChatSampling(temperature=0.7, top_p=0.95, top_k=40, min_p=0.05, repeat_penalty=1.1),
    "creative": ChatSampling(temperature=1.0, top_p=0.98, top_k=100, min_p=0.02, repeat_penalty=1.05),
}


def preset(name: str, keep: ChatSampling | None = None) -> ChatSampling:
    """The preset's sampling; the seed, the reply's length and the thinking switch of `keep` stay."""
    chosen = PRESETS[name.lower()]
    if keep is None:
        return chosen
    return replace(chosen, seed=keep.seed, max_tokens=keep.max_tokens, thinking=keep.thinking)


def field_name(name: str) -> str:
    """The field a typed name means ("temp", "top-p" ...); ValueError names the ones there are."""
    key = name.strip().lower()
    key = ALIASES.get(key, key.replace("-", "_"))
    if key not in {f.name for f in fields(ChatSampling)}:
        raise ValueError(f"no setting named “{name}”: {', '.join(f.name for f in fields(ChatSampling))}")
    return key


def parse(name: str, text: str) -> float | int | bool | None:
    """A typed value for `name` ("0.7", "42", "on", "default"); ValueError says what is expected."""
    key = field_name(name)
    word = text.strip().lower()
    if word in ("", "default", "auto", "model", "reset"):
        return None
    if key == "thinking":
        if word in ("on", "yes", "true", "1"):
            return True
        if word in ("off", "no", "false", "0"):
            return False
        raise ValueError("thinking is on, off or default")
    try:
        number = int(word) if key in INTEGERS else float(word)
    except ValueError:
        raise ValueError(f"{key.replace('_', ' ')} must be a number such as {RANGES[key][1] / 2:g}") from None
    return checked(key, number)


def model_defaults(metadata: Mapping[str, Any]) -> ChatSampling:
    """The sampling a model file's authors put in it (general.sampling.*); unset where it has none."""
    values: dict[str, Any] = {}
    for name, key in GGUF_KEYS.items():
        value = metadata.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float):  # a GGUF keeps float32: 0.6 reads 0.6000000238 (shown and sent as 0.6)
                value = float(f"{value:.6g}")
            try:
                values[name] = checked(name, value)
            except ValueError:
                continue
    return ChatSampling(**values)


def user_defaults(temperature: float | None, max_tokens: int | None) -> ChatSampling:
    """The settings file's defaults for every model (its temperature, None: the model's own; its reply length)."""
    return ChatSampling(temperature=temperature, max_tokens=max_tokens)


def reply_sampling(
    asked: ChatSampling,
    chat: ChatSampling,
    user: ChatSampling,
    metadata: Mapping[str, Any],
    fmt: ChatFormat,
    stop: tuple[str, ...] = (),
) -> GenerationParams:
    """What a reply is sampled with, the one rule for the chat, `-p` and the server: for each value, what the
    request or the command line asked, else the chat's own, else the user's defaults (the settings file),
    else the model file's `general.sampling.*`, else the default of the model's kind (`temperature_for`) and
    the engine's. `stop`: strings the request adds to the format's own."""
    engine = GenerationParams()
    layers = (asked, chat, user, model_defaults(metadata))

    def pick(name: str, fallback: Any) -> Any:
        for source in layers:
            value = getattr(source, name)
            if value is not None:
                return value
        return fallback

    return GenerationParams(
        max_tokens=pick("max_tokens", DEFAULT_MAX_TOKENS),
        temperature=pick("temperature", temperature_for(None, fmt)),
        top_k=pick("top_k", engine.top_k),
        top_p=pick("top_p", engine.top_p),
        min_p=pick("min_p", engine.min_p),
        repeat_penalty=pick("repeat_penalty", engine.repeat_penalty),
        seed=pick("seed", engine.seed),
        stop=tuple(dict.fromkeys((*fmt.stop, *stop))),
    )


def sampling_words(sampling: Mapping[str, Any]) -> str:
    """A reply's sampling (as `sampling_json` keeps it) in one line: "greedy · top-p 0.95 · ... · max 512 tokens"."""
    temperature = sampling.get("temperature")
    parts = ["greedy" if temperature is not None and temperature <= 0 else f"temp {temperature:g}"]
    for key, word in (("top_p", "top-p"), ("top_k", "top-k"), ("min_p", "min-p"), ("repeat_penalty", "repeat")):
        value = sampling.get(key)
        if value is not None:
            parts.append(f"{word} {value:g}")
    seed = sampling.get("seed")
    if seed is not None:
        parts.append("seed random" if seed < 0 else f"seed {seed}")
    if sampling.get("max_tokens") is not None:
        parts.append(f"max {sampling['max_tokens']:,} tokens")
    return " · ".join(parts)


def sampling_json(params: GenerationParams) -> dict[str, Any]:
    """The sampling a reply ran with, as `-p --json`, the store and the export write it (seed -1: random)."""
    return {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "min_p": params.min_p,
        "repeat_penalty": params.repeat_penalty,
        "seed": params.seed,
        "max_tokens": params.max_tokens,
    }


# -- the temperature of a model's kind, where neither the chat nor the file sets one. A base model
# without a chat template (the demo) is talked to as a Q/A transcript; sampled, even at 0.2, it wanders
# ("France is the capital of France."), greedily it answers "Paris" every time: so the transcript format
# decodes greedily unless the user set a temperature; chat-template models keep a low one.

TRANSCRIPT_TEMPERATURE = 0.0  # greedy: a base model's most likely continuation is its best answer
CHAT_TEMPERATURE = 0.2  # low: small models wander at higher temperatures


def temperature_for(chosen: float | None, fmt: ChatFormat) -> float:
    """The temperature a reply is sampled at: the user's, else the model kind's default."""
    if chosen is not None:
        return chosen
    return TRANSCRIPT_TEMPERATURE if fmt.kind == "transcript" else CHAT_TEMPERATURE


def temperature_words(
    params: GenerationParams, chat: ChatSampling, user: ChatSampling, metadata: Mapping[str, Any], fmt: ChatFormat
) -> str:
    """For the status line: the temperature `params` samples at, saying whose it is where it is not the chat's
    own ("temp 0.7 (your default)", "temp 0.6 (the model's)", "greedy (base model)")."""
    if chat.temperature is not None:
        whose = ""
    elif user.temperature is not None:
        whose = " (your default)"
    elif model_defaults(metadata).temperature is not None:
        whose = " (the model's)"
    else:
        return describe_temperature(None, fmt)
    return ("greedy" if params.temperature <= 0 else f"temp {params.temperature:g}") + whose


def describe_temperature(chosen: float | None, fmt: ChatFormat) -> str:
    """For the status line: "temp 0.7", or the default and why ("greedy (base model)")."""
    value = temperature_for(chosen, fmt)
    if chosen is not None:
        return f"temp {value:g}"
    return "greedy (base model)" if value == 0 else f"temp {value:g} (default)"

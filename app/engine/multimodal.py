"""Images and sounds in a prompt: libmtmd, llama.cpp's multimodal library, in the engine process.

`MediaContext` loads the projector beside the model (`mtmd_init_from_file`, on the device the
plan chose), turns a `MediaPrompt` into chunks (`mtmd_tokenize`: the text's tokens, and for each
image the tokens clip's preprocessing gives it, the image scaled to at most the plan's largest),
encodes each image (`mtmd_encode_chunk`) and decodes its embeddings into the context
(`mtmd_helper_decode_image_chunk`, which knows each model's positions and attention).

What the projector holds: clip logs its compute buffer after the warmup and never logs its
weight buffer. While an image is encoded, ggml's scheduler shows each node of the graph to an
eval callback (`BufferWatch`); the buffers those nodes and their sources live in are the
projector's compute and weight buffers, whose exact sizes ggml then reports. The same callback
stops an encode at once when the user presses Esc.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from app.engine.llama_log import LogCapture, capture
from app.engine.stop_flag import StopFlag
from app.engine.types import EngineError, Media, MediaPrompt, ProjectorLoad

GGML_MAX_SRC = 10
_USAGE_WEIGHTS, _USAGE_COMPUTE = 1, 2  # enum ggml_backend_buffer_usage


class Stopped(Exception):
    """The user stopped the reply while an image was being encoded."""


class _Tensor(ctypes.Structure):
    """The head of struct ggml_tensor of the pinned ggml (ggml.h): up to the fields read here."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4),
        ("nb", ctypes.c_size_t * 4),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * 16),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * GGML_MAX_SRC),
    ]


_BUFFER_AT = _Tensor.buffer.offset
_SRC_AT = _Tensor.src.offset
_POINTER = ctypes.sizeof(ctypes.c_void_p)


@lru_cache(maxsize=1)
def _ggml_base() -> ctypes.CDLL:
    """libggml-base (the versioned file, the one libmtmd links to), for the buffers' names and sizes."""
    from app.native import library_dir, open_library

    lib = open_library(library_dir(), "ggml-base")
    lib.ggml_backend_buffer_get_size.restype = ctypes.c_size_t
    lib.ggml_backend_buffer_get_size.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_buffer_name.restype = ctypes.c_char_p
    lib.ggml_backend_buffer_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_buffer_get_usage.restype = ctypes.c_int
    lib.ggml_backend_buffer_get_usage.argtypes = [ctypes.c_void_p]
    return lib


class BufferWatch:
    """The eval callback of clip's scheduler: the projector's buffers, read while it encodes, and a stop."""

    def __init__(self, stop: StopFlag) -> None:
        import llama_cpp

        self._ggml = _ggml_base()
        self._stop = stop
        self._seen: set[int] = set()
        self.weights: dict[str, int] = {}
        self.compute: dict[str, int] = {}
        self.stopped = False
        self.callback = llama_cpp.ggml_backend_sched_eval_callback(self._on_node)

    def begin(self) -> None:
        """Before an encode: read the buffers again (the compute buffer may have grown: ggml then made a
        new one); each buffer counts once an encode, whichever nodes show it."""
        self._seen.clear()
        self.compute = {}
        self.weights = {}
        self.stopped = False

    def _on_node(self, tensor: int, ask: bool, _user: Any) -> bool:
        if self._stop.is_set():
            # "needed": ggml computes up to this node and shows it; "do not go on": the graph ends here
            self.stopped = True
            return bool(ask)
        if not ask:
            return True
        self._note(ctypes.c_void_p.from_address(tensor + _BUFFER_AT).value)
        if not self.weights:
            for i in range(GGML_MAX_SRC):
                src = ctypes.c_void_p.from_address(tensor + _SRC_AT + i * _POINTER).value
                if src:
                    self._note(ctypes.c_void_p.from_address(src + _BUFFER_AT).value)
        return False

    def _note(self, buffer: int | None) -> None:
        if not buffer or buffer in self._seen:
            return
        self._seen.add(buffer)
        ggml = self._ggml
        usage = ggml.ggml_backend_buffer_get_usage(buffer)
        table = {_USAGE_WEIGHTS: self.weights, _USAGE_COMPUTE: self.compute}.get(usage)
        if table is None:
            return
        name = (ggml.ggml_backend_buffer_name(buffer) or b"?").decode("utf-8", errors="replace")
        table[name] = table.get(name, 0) + int(ggml.ggml_backend_buffer_get_size(buffer))


def media_cell(media_id: str) -> int:
    """The number that stands for one image's cells in the engine's record of the KV cache: negative
    (no token has it), the same for the same image, so that a conversation's prefix is reused."""
    try:
        value = int(media_id[:12], 16)
    except ValueError:
        value = sum(ord(c) * 131**i for i, c in enumerate(media_id[:24]))
    return -(value % (1 << 48)) - 1


@dataclass
class Segment:
    """One chunk of a tokenized media prompt: text tokens, or one image's (or sound's) cells."""

    kind: str  # "text", "image" or "audio"
    cells: list[int]
    n_pos: int  # positions it takes (an image under M-RoPE takes fewer than its tokens)
    chunk: int  # the mtmd_input_chunk
    media_id: str = ""


@dataclass
class MediaChunks:
    """A media prompt as libmtmd tokenized it (freed with `free`)."""

    key: tuple[str, tuple[str, ...]]
    segments: list[Segment]
    handle: int
    _freed: bool = field(default=False, repr=False)

    @property
    def cells(self) -> list[int]:
        return [c for s in self.segments for c in s.cells]

    @property
    def media_count(self) -> int:
        return sum(1 for s in self.segments if s.kind != "text")

    def free(self) -> None:
        if not self._freed:
            from llama_cpp import mtmd_cpp

            mtmd_cpp.mtmd_input_chunks_free(self.handle)
            self._freed = True


_KINDS = {0: "text", 1: "image", 2: "audio"}


class MediaContext:
    """The projector, loaded beside a model: tokenize, encode and decode images and sounds."""

    def __init__(self, model: Any, load: ProjectorLoad, n_threads: int, stop: StopFlag) -> None:
        from llama_cpp import mtmd_cpp

        self.load = load
        self.log = LogCapture(keep=200)
        self.log.echo_fd = capture().echo_fd
        callback = self.log.callback()
        mtmd_cpp.mtmd_log_set(callback, ctypes.c_void_p(0))
        mtmd_cpp.mtmd_helper_log_set(callback, ctypes.c_void_p(0))
        self.watch = BufferWatch(stop)
        params = mtmd_cpp.mtmd_context_params_default()
        params.use_gpu = load.use_gpu
        params.print_timings = False
        params.n_threads = n_threads
        params.flash_attn_type = 1 if load.flash_attn else 0
        self._marker = load.marker.encode("utf-8")  # kept alive: libmtmd copies it, ctypes needs it meanwhile
        params.media_marker = self._marker
        if load.image_max_tokens:
            params.image_max_tokens = load.image_max_tokens
        params.cb_eval = self.watch.callback
        start = time.perf_counter()
        ctx = mtmd_cpp.mtmd_init_from_file(os.fsencode(load.path), model, params)
        self.seconds = time.perf_counter() - start
        if not ctx:
            errors = self.log.errors()
            raise EngineError(_failure(f"could not load the projector {_name(load.path)}", errors), errors)
        self._ctx = ctx
        self.vision = bool(mtmd_cpp.mtmd_support_vision(ctx))
        self.audio = bool(mtmd_cpp.mtmd_support_audio(ctx))
        # what clip's warmup reserved, as its log said (to 0.01 MiB); exact after the first image
        self.compute_logged = dict(self.log.measurements.compute)

    def close(self) -> None:
        from llama_cpp import mtmd_cpp

        if self._ctx:
            mtmd_cpp.mtmd_free(self._ctx)
            self._ctx = None

    # -- a prompt in chunks -------------------------------------------------------------------------

    def tokenize(self, prompt: MediaPrompt) -> MediaChunks:
        """The prompt as libmtmd's chunks; EngineError with the reason when an image cannot be used."""
        from llama_cpp import mtmd_cpp

        markers = prompt.text.count(self.load.marker)
        if markers != len(prompt.media):
            raise EngineError(f"the prompt marks {markers} images but carries {len(prompt.media)}")
        bitmaps = [self._bitmap(m) for m in prompt.media]
        try:
            handle = mtmd_cpp.mtmd_input_chunks_init()
            raw = prompt.text.encode("utf-8")
            text = mtmd_cpp.mtmd_input_text(raw, len(raw), True, True)
            array = (mtmd_cpp.mtmd_bitmap_p_ctypes * max(len(bitmaps), 1))(*bitmaps)
            self.log.reset()
            rc = mtmd_cpp.mtmd_tokenize(self._ctx, handle, ctypes.byref(text), array, len(bitmaps))
        finally:
            for bitmap in bitmaps:
                mtmd_cpp.mtmd_bitmap_free(bitmap)
        if rc != 0:
            mtmd_cpp.mtmd_input_chunks_free(handle)
            errors = self.log.errors()
            why = "the image could not be prepared for the projector" if rc == 2 else f"libmtmd refused it ({rc})"
            raise EngineError(_failure(why, errors), errors)
        segments = []
        for i in range(mtmd_cpp.mtmd_input_chunks_size(handle)):
            chunk = mtmd_cpp.mtmd_input_chunks_get(handle, i)
            kind = _KINDS.get(mtmd_cpp.mtmd_input_chunk_get_type(chunk), "text")
            if kind == "text":
                n = ctypes.c_size_t()
                tokens = mtmd_cpp.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                cells = [int(tokens[j]) for j in range(n.value)]
                segments.append(Segment("text", cells, len(cells), chunk))
                continue
            raw_id = mtmd_cpp.mtmd_input_chunk_get_id(chunk)
            media_id = raw_id.decode("utf-8", errors="replace") if raw_id else ""
            n_tokens = int(mtmd_cpp.mtmd_input_chunk_get_n_tokens(chunk))
            n_pos = int(mtmd_cpp.mtmd_input_chunk_get_n_pos(chunk))
            segments.append(Segment(kind, [media_cell(media_id)] * n_tokens, n_pos, chunk, media_id))
        key = (prompt.text, tuple(m.id for m in prompt.media))
        return MediaChunks(key, segments, handle)

    def _bitmap(self, media: Media) -> int:
        from llama_cpp import mtmd_cpp

        data = media.payload()
        if media.kind == "audio":
            if not self.audio:
                raise EngineError("this model's projector has no audio encoder: it cannot hear sounds")
            buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
            bitmap = mtmd_cpp.mtmd_helper_bitmap_init_from_buf(self._ctx, buf, len(data), False)
            if not bitmap:
                raise EngineError("the sound could not be decoded (libmtmd reads WAV, MP3 and FLAC)")
        else:
            if not self.vision:
                raise EngineError("this model's projector has no vision encoder: it cannot see images")
            if len(data) != media.width * media.height * 3 or not media.width or not media.height:
                raise EngineError("the image's pixels do not match its size")
            pixels = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
            bitmap = mtmd_cpp.mtmd_bitmap_init(media.width, media.height, pixels)
            if not bitmap:
                raise EngineError("libmtmd could not take the image")
        mtmd_cpp.mtmd_bitmap_set_id(bitmap, media.id.encode("utf-8"))
        return int(bitmap)

    # -- encode and decode --------------------------------------------------------------------------

    def encode(self, segment: Segment) -> float:
        """Run the image (or sound) through the projector; seconds it took. Raises Stopped when the user
        stopped it, EngineError when it failed."""
        from llama_cpp import mtmd_cpp

        self.watch.begin()
        self.log.reset()
        start = time.perf_counter()
        rc = mtmd_cpp.mtmd_encode_chunk(self._ctx, segment.chunk)
        if self.watch.stopped:
            raise Stopped
        if rc != 0:
            errors = self.log.errors()
            raise EngineError(_failure(f"the projector could not encode the {segment.kind}", errors), errors)
        return time.perf_counter() - start

    def decode(self, lctx: Any, segment: Segment, n_past: int, n_batch: int) -> tuple[int, int]:
        """Decode the last encoded image's embeddings into the context from position `n_past`:
        (llama_decode's status, the next position)."""
        import llama_cpp
        from llama_cpp import mtmd_cpp

        embeddings = mtmd_cpp.mtmd_get_output_embd(self._ctx)
        new_n_past = llama_cpp.llama_pos(n_past)
        no_callback = mtmd_cpp.mtmd_helper_post_decode_callback()  # a NULL function pointer
        rc = mtmd_cpp.mtmd_helper_decode_image_chunk(
            self._ctx, lctx, segment.chunk, embeddings, n_past, 0, n_batch, ctypes.byref(new_n_past), no_callback, None
        )
        return int(rc), int(new_n_past.value)

    def non_causal(self, segment: Segment) -> bool:
        """Whether the model attends to this image's tokens both ways (Gemma 3): one micro-batch must hold it."""
        from llama_cpp import mtmd_cpp

        return bool(mtmd_cpp.mtmd_decode_use_non_causal(self._ctx, segment.chunk))

    def buffers(self) -> tuple[dict[str, int], dict[str, int]]:
        """(weights, compute) per buffer name: exact once an image has been encoded; before that no
        weights, and the compute buffer clip's warmup logged."""
        compute = self.watch.compute or self.compute_logged
        return dict(self.watch.weights), dict(compute)


def _name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _failure(what: str, errors: list[str]) -> str:
    detail = "; ".join(line.strip() for line in errors[-3:])
    return f"{what}: {detail}" if detail else what


def prompt_ends_in_text(prompt: MediaPrompt, marker: str) -> bool:
    return not prompt.text.rstrip().endswith(marker)

"""The llama.cpp engine: load a model with a plan, stream tokens, stop at once.

Built on llama-cpp-python's low-level API rather than its `Llama` class, for
what a chat app needs and `Llama` does not offer: load progress (and cancel),
an abort callback that stops prompt processing mid-batch, the KV cells in use,
and prompt-prefix reuse across turns.

Not thread-safe by itself: the app drives one engine from one worker thread at
a time; `stop()` is the only call meant for other threads.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from app.devices.process import snapshot
from app.engine.llama_log import capture
from app.engine.logprobs import drop_cut, token_logprob
from app.engine.markers import first_stop, partial_marker
from app.engine.params import apply_context_params, apply_model_params, ensure_backend
from app.engine.sampler_chain import ReplySampler
from app.engine.stop_flag import StopFlag
from app.engine.types import (
    EngineError,
    GenerationParams,
    GenerationStats,
    LoadReport,
    MediaEncoded,
    MediaPrompt,
    ProjectorInfo,
    ProjectorLoad,
    ResizeReport,
)
from planner.config import LoadConfig

if TYPE_CHECKING:
    from app.engine.dry_run import DryRun

if TYPE_CHECKING:
    from app.engine.multimodal import MediaChunks, MediaContext
    from app.engine.slots import Slots


class Engine:
    def __init__(self) -> None:
        self._model = None
        self._ctx = None
        self._vocab = None
        self._sampler: ReplySampler | None = None
        self._tokens: list[int] = []  # what the KV cache holds, in order (an image: media.media_cell)
        self._positions: list[int] = []  # each cell's position (an image's cells: the image's first)
        self._n_past = 0  # the next position (under M-RoPE an image takes fewer positions than cells)
        self._batch: Any = None  # a llama_batch with room for n_batch tokens, positions given
        self._media: MediaContext | None = None  # the projector, when one is loaded
        self._prepared: MediaChunks | None = None  # the last media prompt tokenized, kept for its reply
        self._slots: Slots | None = None  # parallel sequences, while a server uses them (app/engine/slots.py)
        self._stop = StopFlag()
        self._progress_cb: Any = None
        self.report: LoadReport | None = None
        self.last_stats = GenerationStats()
        self.generating = threading.Event()
        # told when the prompt is in the cache and the first token is about to be sampled
        self.on_prefilled: Callable[[GenerationStats], None] | None = None
        # told after each batch of a prompt is read: (tokens read so far, of how many), for progress
        self.on_prefill_step: Callable[[int, int], None] | None = None
        # told before an image is encoded: (its place among the prompt's new images, how many there are)
        self.on_media_encoding: Callable[[int, int], None] | None = None
        # told when an image has gone through the projector
        self.on_media_encoded: Callable[[MediaEncoded], None] | None = None

    # -- what the app asks of any engine (app.session.EngineLike), in this process -----------------

    resizable = True  # resize() carries the conversation over to a context of a new size
    stall_timeout: float | None = None  # nothing to wait for: llama.cpp runs in this process
    stall_on_rpc = False

    @property
    def pid(self) -> int | None:
        return None  # llama.cpp runs in this process (the engine process's Engine, a bench, a test)

    def exit_while_idle(self) -> None:
        """An engine in this process cannot end while this process lives."""
        return None

    def dry_run(self, path: str, config: LoadConfig) -> DryRun:
        """llama.cpp's no_alloc dry run of `config`, in this process."""
        from app.engine.dry_run import dry_run

        return dry_run(path, config)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._ctx is not None

    def load(
        self,
        path: str | os.PathLike[str],
        config: LoadConfig,
        progress: Callable[[float], bool | None] | None = None,
        projector: ProjectorLoad | None = None,
    ) -> LoadReport:
        """Load the model and create its context exactly as `config` says, and the projector beside it
        when one is given.

        `progress(fraction)` is called while the weights load; returning False cancels.
        """
        import llama_cpp

        self.unload()
        ensure_backend()
        log = capture()
        log.reset()
        path = os.fspath(path)
        before = snapshot()
        start = time.perf_counter()
        mparams = llama_cpp.llama_model_default_params()
        apply_model_params(mparams, config)
        cancelled = threading.Event()

        def on_progress(fraction: float, _user: ctypes.c_void_p) -> bool:
            if self._stop.is_set():
                cancelled.set()
                return False
            if progress is not None and progress(float(fraction)) is False:
                cancelled.set()
                return False
            return True

        self._progress_cb = llama_cpp.llama_progress_callback(on_progress)
        mparams.progress_callback = self._progress_cb
        self._stop.clear()
        model = llama_cpp.llama_model_load_from_file(os.fsencode(path), mparams)
        if not model:
            if cancelled.is_set():
                raise EngineError("loading was cancelled")
            raise EngineError(_failure("could not load the model", log.errors()), log.errors())

        ctx = self._new_context(model, config)
        if not ctx:
            llama_cpp.llama_model_free(model)
            raise EngineError(_failure("could not create the context", log.errors()), log.errors())
        self._model, self._ctx = model, ctx
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._forget_cells()
        info = None
        if projector is not None:
            info = self._load_projector(projector)
        template = llama_cpp.llama_model_chat_template(model, None)
        seconds = time.perf_counter() - start
        measurements = log.measurements
        if self._media is not None:
            measurements.projector_weights, measurements.projector_compute = self._media.buffers()
        self.report = LoadReport(
            path=path,
            config=config,
            seconds=seconds,
            measurements=measurements,
            n_ctx=llama_cpp.llama_n_ctx(ctx),
            n_vocab=llama_cpp.llama_vocab_n_tokens(self._vocab),
            chat_template=template.decode("utf-8", errors="replace") if template else None,
            log_tail=log.tail(60),
            process_before=before,
            process=snapshot(),
            projector=info,
            fim_tokens=self._fim_tokens(),
        )
        return self.report

    def _fim_tokens(self) -> tuple[int, int, int] | None:
        import llama_cpp

        vocab = self._vocab
        ids = (
            llama_cpp.llama_vocab_fim_pre(vocab),
            llama_cpp.llama_vocab_fim_suf(vocab),
            llama_cpp.llama_vocab_fim_mid(vocab),
        )
        return None if any(i < 0 for i in ids) else ids

    def _load_projector(self, load: ProjectorLoad) -> ProjectorInfo:
        """libmtmd's context for the projector, beside the model just loaded; on failure nothing stays loaded."""
        from app.engine.multimodal import MediaContext

        try:
            self._media = MediaContext(self._model, load, _threads(), self._stop)
        except EngineError:
            self.unload()
            raise
        media = self._media
        return ProjectorInfo(load.path, media.vision, media.audio, load.marker, media.seconds)

    def _new_context(self, model, config: LoadConfig):
        import llama_cpp

        cparams = llama_cpp.llama_context_default_params()
        apply_context_params(cparams, config)
        cparams.n_threads = cparams.n_threads_batch = _threads()
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        if ctx:
            self._stop.install(ctx)
        return ctx

    def resize(self, n_ctx: int, keep: bool = True) -> ResizeReport:
        """A new context of `n_ctx` tokens for the loaded model, the conversation carried over
        (llama.cpp's sequence state: the cells' K/V and recurrent state, no re-prefill) unless
        `keep` is False. When the new context cannot be made (no memory), the old size is made
        again with the conversation in it, and EngineError says why."""
        import llama_cpp

        self._require()
        self._drop_slots()
        assert self.report is not None
        start = time.perf_counter()
        old = self.report.config
        new = old.with_(n_ctx=n_ctx)
        state = self._save_state() if keep and self._tokens else None
        cells = (list(self._tokens), list(self._positions), self._n_past) if state is not None else None
        log = capture()
        model_buffers = dict(self.report.measurements.model)
        log.reset()
        llama_cpp.llama_free(self._ctx)
        self._ctx = None
        ctx = self._new_context(self._model, new)
        error = None
        if not ctx:
            errors = log.errors()
            error = EngineError(_failure(f"could not grow the context to {n_ctx:,} tokens", errors), errors)
            log.reset()
            new = old
            ctx = self._new_context(self._model, old)
            if not ctx:  # not even the old size any more: nothing is loaded
                self._forget_cells()
                self.report = None
                raise EngineError(_failure("could not create the context again", log.errors()), log.errors())
        self._ctx = ctx
        self._forget_cells()
        if state is not None and cells is not None and self._restore_state(state):
            self._tokens, self._positions, self._n_past = cells
        measurements = log.measurements
        measurements.model = model_buffers
        measurements.projector_weights = self.report.measurements.projector_weights
        measurements.projector_compute = self.report.measurements.projector_compute
        self.report = dataclasses.replace(
            self.report, config=new, n_ctx=llama_cpp.llama_n_ctx(ctx), measurements=measurements
        )
        if error is not None:
            raise error
        return ResizeReport(
            self.report.n_ctx, time.perf_counter() - start, len(self._tokens), len(state) if state is not None else 0
        )

    def _save_state(self) -> bytes:
        import llama_cpp

        size = llama_cpp.llama_state_seq_get_size(self._ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = llama_cpp.llama_state_seq_get_data(self._ctx, buf, size, 0)
        return bytes(buf[:n])

    def _restore_state(self, state: bytes) -> bool:
        import llama_cpp

        buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        return llama_cpp.llama_state_seq_set_data(self._ctx, buf, len(state), 0) == len(state)

    def _forget_cells(self) -> None:
        self._tokens, self._positions, self._n_past = [], [], 0

    def unload(self) -> None:
        import llama_cpp

        self._drop_prepared()
        self._drop_slots()
        if self._media is not None:
            self._media.close()
            self._media = None
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self._sampler is not None:
            self._sampler.free()
            self._sampler = None
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            llama_cpp.llama_model_free(self._model)
            self._model = None
        self._vocab = None
        self._forget_cells()
        self.report = None

    def close(self) -> None:
        self.unload()

    # -- tokens ----------------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        import llama_cpp

        self._require()
        raw = text.encode("utf-8")
        n_max = len(raw) + 16
        buf = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(self._vocab, raw, len(raw), buf, n_max, add_special, parse_special)
        if n < 0:
            n_max = -n
            buf = (llama_cpp.llama_token * n_max)()
            n = llama_cpp.llama_tokenize(self._vocab, raw, len(raw), buf, n_max, add_special, parse_special)
        return list(buf[:n])

    def token_piece(self, token: int) -> bytes:
        import llama_cpp

        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        return buf.raw[:n]

    def special_text(self, which: str) -> str:
        """The text of the BOS or EOS token (for chat templates)."""
        import llama_cpp

        self._require()
        fn = {"bos": llama_cpp.llama_vocab_bos, "eos": llama_cpp.llama_vocab_eos}[which]
        token = fn(self._vocab)
        if token < 0:
            return ""
        return self.token_piece_special(token).decode("utf-8", errors="replace")

    def token_piece_special(self, token: int) -> bytes:
        import llama_cpp

        buf = ctypes.create_string_buffer(128)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
        return buf.raw[: max(n, 0)]

    @property
    def n_ctx(self) -> int:
        return self.report.n_ctx if self.report else 0

    def kv_cells_used(self) -> int:
        """Cells the conversation occupies in the KV cache.

        The engine is the only writer of the cache and mirrors its tokens, so this is
        read without calling into llama.cpp: safe from the telemetry thread mid-decode.
        """
        if self._slots is not None:
            return self._slots.cells_used()
        return len(self._tokens)

    # -- generation ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the current generation (or load) as soon as possible; safe from any thread."""
        self._stop.set()

    def _require(self) -> None:
        if self._ctx is None:
            raise EngineError("no model is loaded")

    def _make_sampler(self, params: GenerationParams) -> ReplySampler:
        import llama_cpp

        if self._sampler is not None:
            self._sampler.free()
        self._sampler = ReplySampler(params, llama_cpp.llama_vocab_n_tokens(self._vocab), self._vocab)
        return self._sampler

    def _decode(self, tokens: list[int], progress: Callable[[int, int], None] | None = None) -> None:
        """Decode `tokens` at the next positions, a batch at a time; logits for the last one."""
        import llama_cpp

        n_batch = self._n_batch()
        if self._batch is None:
            self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        batch = self._batch
        for i in range(0, len(tokens), n_batch):
            if progress is not None and i:
                progress(i, len(tokens))
            chunk = tokens[i : i + n_batch]
            n = len(chunk)
            for j, token in enumerate(chunk):
                batch.token[j] = token
                batch.pos[j] = self._n_past + j
                batch.n_seq_id[j] = 1
                batch.seq_id[j][0] = 0
                batch.logits[j] = j == n - 1
            batch.n_tokens = n
            self._check(llama_cpp.llama_decode(self._ctx, batch))
            self._tokens.extend(chunk)
            self._positions.extend(range(self._n_past, self._n_past + n))
            self._n_past += n

    def _n_batch(self) -> int:
        return self.report.config.n_batch if self.report else 512

    @staticmethod
    def _check(rc: int) -> None:
        """llama_decode's status: 0 goes on, 2 (aborted) is a stop, anything else an EngineError."""
        if rc == 0:
            return
        if rc == 2:
            raise _Stopped
        reason = {
            1: "the KV cache is full (no slot for the batch)",
            -2: "out of memory",
            -3: "the computation failed",
        }
        errors = capture().errors()
        raise EngineError(_failure(f"llama.cpp could not decode ({reason.get(rc, f'error {rc}')})", errors), errors, rc)

    def _reuse_prefix(self, tokens: list[int]) -> int:
        """Keep the part of the KV cache the new prompt shares with what it holds (never part of an image)."""
        import llama_cpp

        keep = 0
        for a, b in zip(self._tokens, tokens):
            if a != b:
                break
            keep += 1
        keep = min(keep, len(tokens) - 1)  # always evaluate the last token to get logits
        # an image is decoded whole: a cut inside one goes back to where it starts
        while 0 < keep < len(self._tokens) and self._tokens[keep] < 0 and self._tokens[keep - 1] == self._tokens[keep]:
            keep -= 1
        if keep < len(self._tokens):
            mem = llama_cpp.llama_get_memory(self._ctx)
            if llama_cpp.llama_memory_seq_rm(mem, 0, self._positions[keep], -1):
                self._n_past = self._positions[keep]
            else:
                llama_cpp.llama_memory_clear(mem, True)
                keep, self._n_past = 0, 0
            self._tokens = self._tokens[:keep]
            self._positions = self._positions[:keep]
        return keep

    # -- parallel sequences ------------------------------------------------------------------------

    def slots(self) -> Slots:
        """The context's sequences as slots for parallel replies (app/engine/slots.py); the one-reply
        conversation of sequence 0 is let go (a later `generate` lets the slots go in turn)."""
        import llama_cpp

        from app.engine.slots import SlotContext, Slots

        self._require()
        if self._slots is None:
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._ctx), True)
            self._forget_cells()
            self._stop.clear()
            assert self.report is not None
            self._slots = Slots(
                SlotContext(
                    self._ctx,
                    self._vocab,
                    llama_cpp.llama_vocab_n_tokens(self._vocab),
                    self._n_batch(),
                    llama_cpp.llama_n_seq_max(self._ctx),
                    llama_cpp.llama_n_ctx_seq(self._ctx),
                    self.token_piece,
                )
            )
        return self._slots

    def _drop_slots(self) -> None:
        import llama_cpp

        if self._slots is None:
            return
        self._slots.close()
        self._slots = None
        if self._ctx is not None:
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._ctx), True)

    # -- images and sounds ------------------------------------------------------------------------

    @property
    def media_marker(self) -> str:
        """The text that stands for one image in a prompt ('' without a projector)."""
        return self._media.load.marker if self._media is not None else ""

    def tokenize_media(self, prompt: MediaPrompt) -> list[int]:
        """The cells `prompt` takes in the KV cache: its text's tokens, and each image's as many as the
        projector makes of it (what a context must hold). Kept for the reply that follows."""
        return self._prepare(prompt).cells

    def _prepare(self, prompt: MediaPrompt) -> MediaChunks:
        self._require()
        if self._media is None:
            raise EngineError("no projector is loaded: this model cannot see images")
        key = (prompt.text, tuple(m.id for m in prompt.media))
        if self._prepared is not None and self._prepared.key == key:
            return self._prepared
        self._drop_prepared()
        self._prepared = self._media.tokenize(prompt)
        return self._prepared

    def _drop_prepared(self) -> None:
        if self._prepared is not None:
            self._prepared.free()
            self._prepared = None

    def _eval_media(self, chunks: MediaChunks, keep: int, progress: Callable[[int, int], None] | None) -> None:
        """Decode the prompt's chunks past the `keep` cells the cache already holds: text a batch at a
        time, each image through the projector, then its embeddings."""
        media = self._media
        assert media is not None and self.report is not None
        config = self.report.config
        total = len(chunks.cells) - keep
        todo = [s for s, at in _starts(chunks) if at >= keep and s.kind != "text"]
        start, done, encoded = 0, 0, 0
        for segment in chunks.segments:
            end = start + len(segment.cells)
            if end <= keep:
                start = end
                continue
            if segment.kind == "text":
                skip = max(keep - start, 0)
                offset = done

                def step(read: int, _of: int, offset: int = offset) -> None:
                    if progress is not None:
                        progress(offset + read, total)

                self._decode(segment.cells[skip:], step)
                done += len(segment.cells) - skip
            else:
                n = len(segment.cells)
                both_ways = media.non_causal(segment)
                if both_ways and n > config.n_ubatch:
                    raise EngineError(
                        f"this image takes {n:,} tokens and the model reads an image in one micro-batch of at most "
                        f"{config.n_ubatch:,}: load it with --ubatch {n} or more, or allow fewer tokens an image "
                        f"(--image-max-tokens)"
                    )
                if self.on_media_encoding is not None:
                    self.on_media_encoding(encoded, len(todo))
                try:
                    seconds = media.encode(segment)
                except Exception as exc:
                    from app.engine.multimodal import Stopped

                    if isinstance(exc, Stopped):
                        raise _Stopped from None
                    raise
                self._record_projector_buffers()
                rc, new_n_past = media.decode(self._ctx, segment, self._n_past, min(config.n_batch, config.n_ubatch))
                self._check(rc)
                self._tokens.extend(segment.cells)
                self._positions.extend([self._n_past] * n)
                self._n_past = new_n_past
                done += n
                if progress is not None:
                    progress(done, total)
                if self.on_media_encoded is not None:
                    self.on_media_encoded(MediaEncoded(segment.media_id, encoded, len(todo), n, seconds))
                encoded += 1
            start = end

    def _record_projector_buffers(self) -> None:
        """The projector's buffers as ggml holds them now (exact, read while it encoded)."""
        if self._media is None or self.report is None:
            return
        m = self.report.measurements
        m.projector_weights, m.projector_compute = self._media.buffers()

    # -- generation (continued) --------------------------------------------------------------------

    def generate(self, prompt: list[int] | str | MediaPrompt, params: GenerationParams | None = None) -> Iterator[str]:
        """Stream the reply to `prompt` (tokens, text, or text with images) as text pieces. Stops at EOS,
        a stop string, max_tokens, a full context, or `stop()`; `last_stats` tells which."""
        import llama_cpp

        self._require()
        self._drop_slots()
        params = params or GenerationParams()
        chunks = self._prepare(prompt) if isinstance(prompt, MediaPrompt) else None
        if chunks is not None:
            tokens = chunks.cells
            if chunks.segments and chunks.segments[-1].kind != "text":
                raise EngineError("a prompt cannot end with an image")
        else:
            tokens = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)  # type: ignore[arg-type]
        if not tokens:
            raise EngineError("the prompt is empty")
        if len(tokens) >= self.n_ctx:
            raise EngineError(f"the prompt has {len(tokens):,} tokens, more than the context holds ({self.n_ctx:,})")
        stats = GenerationStats(prompt_tokens=len(tokens))
        self.last_stats = stats
        self._stop.clear()
        sampler = self._make_sampler(params)
        self.generating.set()
        try:
            keep = self._reuse_prefix(tokens)
            # the prompt's time starts once the cache is trimmed: dropping the cells of an earlier chat
            # (0.23 ms for 3,100 cells here) is not reading this prompt
            t0 = time.perf_counter()
            stats.reused_tokens = keep
            stats.prompt_started = t0

            def read(done: int, total: int) -> None:
                stats.prompt_read = done
                if self.on_prefill_step is not None:
                    self.on_prefill_step(done, total)

            if len(tokens) - keep > self._n_batch():  # a long prompt says its size and what the cache keeps at once
                read(0, len(tokens) - keep)
            try:
                if chunks is not None:
                    self._eval_media(chunks, keep, read)
                else:
                    self._decode(tokens[keep:], read)
            except _Stopped:
                stats.stopped_by = "user"
                return
            stats.prompt_seconds = time.perf_counter() - t0
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            pending = ""
            t1 = time.perf_counter()
            stats.generation_started = t1
            if self.on_prefilled is not None:
                self.on_prefilled(stats)
            for _ in range(params.max_tokens):
                if self._stop.is_set():
                    stats.stopped_by = "user"
                    break
                if len(self._tokens) >= self.n_ctx:
                    stats.stopped_by = "context"
                    break
                token = sampler.sample(self._ctx, -1)
                if llama_cpp.llama_vocab_is_eog(self._vocab, token):
                    stats.stopped_by = "eos"
                    break
                stats.generated_tokens += 1
                if params.top_logprobs >= 0:
                    n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
                    entry = token_logprob(self._ctx, -1, n_vocab, token, params.top_logprobs, self.token_piece)
                    stats.logprobs.append(entry)
                pending += decoder.decode(self.token_piece(token))
                cut = first_stop(pending, params.stop)
                if cut is not None:
                    drop_cut(stats.logprobs, len(pending) - cut)
                    pending = pending[:cut]
                    if pending:
                        yield pending
                    pending = ""
                    stats.stopped_by = "stop"
                    # the stop token still needs to be in the cache for the next turn's prefix
                    with contextlib.suppress(_Stopped):
                        self._decode([token])
                    break
                safe = len(pending) - partial_marker(pending, params.stop)  # not into a possible stop string
                if safe:
                    yield pending[:safe]
                    pending = pending[safe:]
                try:
                    self._decode([token])
                except _Stopped:
                    stats.stopped_by = "user"
                    break
            else:
                stats.stopped_by = "length"
            if pending and stats.stopped_by != "stop":
                yield pending
            stats.generation_seconds = time.perf_counter() - t1
        finally:
            self._drop_prepared()  # an image's preprocessed pixels are not kept beyond its reply
            self.generating.clear()


class _Stopped(Exception):
    pass


def _threads() -> int:
    return max(1, os.cpu_count() or 2)


def _starts(chunks: MediaChunks) -> Iterator[tuple[Any, int]]:
    """Each segment with the cell it starts at."""
    at = 0
    for segment in chunks.segments:
        yield segment, at
        at += len(segment.cells)


def _failure(what: str, errors: list[str]) -> str:
    detail = "; ".join(line.strip() for line in errors[-3:])
    return f"{what}: {detail}" if detail else what

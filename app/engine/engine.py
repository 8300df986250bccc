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

from app.devices.process import snapshot
from app.engine.llama_log import capture
from app.engine.params import apply_context_params, apply_model_params, ensure_backend
from app.engine.types import EngineError, GenerationParams, GenerationStats, LoadReport, ResizeReport
from planner.config import LoadConfig


class Engine:
    def __init__(self) -> None:
        self._model = None
        self._ctx = None
        self._vocab = None
        self._sampler = None
        self._tokens: list[int] = []  # what the KV cache holds, in order
        self._stop = threading.Event()
        self._abort_cb = None
        self._progress_cb = None
        self.report: LoadReport | None = None
        self.last_stats = GenerationStats()
        self.generating = threading.Event()
        # told when the prompt is in the cache and the first token is about to be sampled
        self.on_prefilled: Callable[[GenerationStats], None] | None = None
        # told after each batch of a prompt is read: (tokens read so far, of how many), for progress
        self.on_prefill_step: Callable[[int, int], None] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._ctx is not None

    def load(
        self, path: str | os.PathLike[str], config: LoadConfig, progress: Callable[[float], bool | None] | None = None
    ) -> LoadReport:
        """Load the model and create its context exactly as `config` says.

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
        model = llama_cpp.llama_model_load_from_file(path.encode(), mparams)
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
        self._tokens = []
        template = llama_cpp.llama_model_chat_template(model, None)
        seconds = time.perf_counter() - start
        self.report = LoadReport(
            path=path,
            config=config,
            seconds=seconds,
            measurements=log.measurements,
            n_ctx=llama_cpp.llama_n_ctx(ctx),
            n_vocab=llama_cpp.llama_vocab_n_tokens(self._vocab),
            chat_template=template.decode("utf-8", errors="replace") if template else None,
            log_tail=log.tail(60),
            process_before=before,
            process=snapshot(),
        )
        return self.report

    def _new_context(self, model, config: LoadConfig):
        import llama_cpp

        cparams = llama_cpp.llama_context_default_params()
        apply_context_params(cparams, config)
        threads = max(1, (os.cpu_count() or 2))
        cparams.n_threads = cparams.n_threads_batch = threads
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        if ctx:
            self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: bool(self._stop.is_set()))
            llama_cpp.llama_set_abort_callback(ctx, self._abort_cb, ctypes.c_void_p(0))
        return ctx

    def resize(self, n_ctx: int, keep: bool = True) -> ResizeReport:
        """A new context of `n_ctx` tokens for the loaded model, the conversation carried over
        (llama.cpp's sequence state: the cells' K/V and recurrent state, no re-prefill) unless
        `keep` is False. When the new context cannot be made (no memory), the old size is made
        again with the conversation in it, and EngineError says why."""
        import llama_cpp

        self._require()
        assert self.report is not None
        start = time.perf_counter()
        old = self.report.config
        new = old.with_(n_ctx=n_ctx)
        state = self._save_state() if keep and self._tokens else None
        tokens = list(self._tokens) if state is not None else []
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
                self._tokens = []
                self.report = None
                raise EngineError(_failure("could not create the context again", log.errors()), log.errors())
        self._ctx = ctx
        self._tokens = []
        if state is not None and self._restore_state(state):
            self._tokens = tokens
        measurements = log.measurements
        measurements.model = model_buffers
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

    def unload(self) -> None:
        import llama_cpp

        if self._sampler is not None:
            llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            llama_cpp.llama_model_free(self._model)
            self._model = None
        self._vocab = None
        self._tokens = []
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
        return len(self._tokens)

    # -- generation ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the current generation (or load) as soon as possible; safe from any thread."""
        self._stop.set()

    def _require(self) -> None:
        if self._ctx is None:
            raise EngineError("no model is loaded")

    def _make_sampler(self, params: GenerationParams) -> None:
        import llama_cpp

        if self._sampler is not None:
            llama_cpp.llama_sampler_free(self._sampler)
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        if params.repeat_penalty != 1.0:
            n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
            llama_cpp.llama_sampler_chain_add(
                chain,
                llama_cpp.llama_sampler_init_penalties(n_vocab, params.repeat_last_n, params.repeat_penalty, 0.0, 0.0),
            )
        if params.temperature <= 0:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        else:
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_k(params.top_k))
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_p(params.top_p, 1))
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_min_p(params.min_p, 1))
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(params.temperature))
            seed = params.seed if params.seed >= 0 else int(time.time_ns() & 0xFFFFFFFF)
            llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(seed))
        self._sampler = chain

    def _decode(self, tokens: list[int], progress: Callable[[int, int], None] | None = None) -> None:
        import llama_cpp

        n_batch = self.report.config.n_batch if self.report else 512
        for i in range(0, len(tokens), n_batch):
            if progress is not None and i:
                progress(i, len(tokens))
            chunk = tokens[i : i + n_batch]
            arr = (llama_cpp.llama_token * len(chunk))(*chunk)
            rc = llama_cpp.llama_decode(self._ctx, llama_cpp.llama_batch_get_one(arr, len(chunk)))
            if rc == 2:
                raise _Stopped
            if rc != 0:
                reason = {
                    1: "the KV cache is full (no slot for the batch)",
                    -2: "out of memory",
                    -3: "the computation failed",
                }
                errors = capture().errors()
                raise EngineError(
                    _failure(f"llama.cpp could not decode ({reason.get(rc, f'error {rc}')})", errors), errors, rc
                )
            self._tokens.extend(chunk)

    def _reuse_prefix(self, tokens: list[int]) -> int:
        """Keep the part of the KV cache the new prompt shares with what it holds."""
        import llama_cpp

        keep = 0
        for a, b in zip(self._tokens, tokens):
            if a != b:
                break
            keep += 1
        keep = min(keep, len(tokens) - 1)  # always evaluate the last token to get logits
        if keep < len(self._tokens):
            mem = llama_cpp.llama_get_memory(self._ctx)
            if not llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
                llama_cpp.llama_memory_clear(mem, True)
                keep = 0
            self._tokens = self._tokens[:keep]
        return keep

    def generate(self, prompt: list[int] | str, params: GenerationParams | None = None) -> Iterator[str]:
        """Stream the reply to `prompt` as text pieces. Stops at EOS, a stop string,
        max_tokens, a full context, or `stop()`; `last_stats` tells which."""
        import llama_cpp

        self._require()
        params = params or GenerationParams()
        tokens = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
        if not tokens:
            raise EngineError("the prompt is empty")
        if len(tokens) >= self.n_ctx:
            raise EngineError(f"the prompt has {len(tokens):,} tokens, more than the context holds ({self.n_ctx:,})")
        stats = GenerationStats(prompt_tokens=len(tokens))
        self.last_stats = stats
        self._stop.clear()
        self._make_sampler(params)
        self.generating.set()
        try:
            t0 = time.perf_counter()
            keep = self._reuse_prefix(tokens)
            stats.reused_tokens = keep
            stats.prompt_started = t0

            def read(done: int, total: int) -> None:
                stats.prompt_read = done
                if self.on_prefill_step is not None:
                    self.on_prefill_step(done, total)

            try:
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
                token = llama_cpp.llama_sampler_sample(self._sampler, self._ctx, -1)
                if llama_cpp.llama_vocab_is_eog(self._vocab, token):
                    stats.stopped_by = "eos"
                    break
                stats.generated_tokens += 1
                pending += decoder.decode(self.token_piece(token))
                cut = _find_stop(pending, params.stop)
                if cut is not None:
                    pending = pending[:cut]
                    if pending:
                        yield pending
                    pending = ""
                    stats.stopped_by = "stop"
                    # the stop token still needs to be in the cache for the next turn's prefix
                    with contextlib.suppress(_Stopped):
                        self._decode([token])
                    break
                safe = _safe_prefix(pending, params.stop)
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
            self.generating.clear()


class _Stopped(Exception):
    pass


def _find_stop(text: str, stops: tuple[str, ...]) -> int | None:
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None


def _safe_prefix(text: str, stops: tuple[str, ...]) -> int:
    """How much of `text` can be shown without cutting into a possible stop string."""
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:k]):
                hold = max(hold, k)
                break
    return len(text) - hold


def _failure(what: str, errors: list[str]) -> str:
    detail = "; ".join(line.strip() for line in errors[-3:])
    return f"{what}: {detail}" if detail else what

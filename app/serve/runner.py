"""The engine side of the server: prompts made, replies run, the engine kept alive.

Two ways to run a reply, over the same ModelSession and engine process as the chat:

- one at a time (the default, and the app's own server): each reply is the session's `engine.generate`,
  as a chat reply is, so a request and a chat reply take turns on the engine; the context grows with
  the request when the plan allows it (`ModelSession.grow_for`), as in the chat;
- N at a time (`--parallel N`): the context was loaded with N sequences (planned exactly: the KV of N
  sequences, each n_ctx / N cells), and replies share the engine's decode steps (app/engine/slots.py
  through app/engine/slot_channel.py); the context does not grow.

A reply runs in a worker thread (a `Job`), its pieces handed to the event loop. A crash, a stall (the
engine process's own watch) or an out-of-memory decode fails the replies it cut short, in words; the
next request then finds the model reloaded through the session's recovery policy (app/conversation/recovery.py),
as the chat does, the same plan again without asking (there is no one to ask) up to MAX_RELOADS times in
a row.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.conversation.outcome import CRASHED, ENGINE_CRASH, OUT_OF_MEMORY, ReplyOutcome
from app.conversation.sampling import ChatSampling, reply_sampling
from app.engine.crash import EngineCrashed
from app.engine.failure import classify
from app.engine.types import EngineError, GenerationParams, GenerationStats, MediaPrompt
from app.serve.errors import ApiError, bad_request, server_error, unavailable
from app.serve.prompts import Prepared, chat_prompt, completion_prompt, infill_prompt
from app.serve.requests import ChatRequest, CompletionRequest, Sampling

if TYPE_CHECKING:
    from app.devices import DeviceReport
    from app.engine.slot_channel import SlotChannel
    from app.session import LoadedModel, ModelSession

MAX_RELOADS = 3  # reloads in a row without a reply that ended well; then the server says it gave up


@dataclass(frozen=True)
class Defaults:
    """The sampling layers under a request's own (app.conversation.sampling.reply_sampling): the server's (what
    `vramchat serve` was given: --temp, --top-p ...) and the user's settings file."""

    server: ChatSampling = field(default_factory=ChatSampling)
    user: ChatSampling = field(default_factory=ChatSampling)


class Job:
    """One reply, run in a worker thread, read on the event loop (`events`: ("piece", (text, tokens)), then
    ("done", GenerationStats) or ("error", ApiError))."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.cancelled = threading.Event()
        self.stats = GenerationStats()
        self._stopper: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def put(self, kind: str, value: Any) -> None:
        self._loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))

    def stops_with(self, stopper: Callable[[], None] | None) -> None:
        """What stops this reply in the engine while it runs (None once it ended)."""
        with self._lock:
            self._stopper = stopper
            if stopper is not None and self.cancelled.is_set():
                stopper()

    def cancel(self) -> None:
        """The client went away: the reply stops at once, its slot is free (any thread)."""
        with self._lock:
            self.cancelled.set()
            if self._stopper is not None:
                self._stopper()


class Runner:
    def __init__(
        self,
        session: ModelSession,
        defaults: Defaults,
        parallel: int = 1,
        reprobe: Callable[[], DeviceReport] | None = None,
        on_note: Callable[[str], None] | None = None,
        recovers: bool = True,
    ) -> None:
        """`recovers`: reload the model after a failure (`vramchat serve`); off in the app, whose chat
        screen owns the recovery (the server answers 503 until the model is back)."""
        self.session = session
        self.recovers = recovers
        self.defaults = defaults
        self.parallel = parallel
        self._reprobe = reprobe
        self._note = on_note or (lambda _text: None)
        self._turn = threading.Lock()  # one reply at a time on the one-at-a-time path
        self._ready = threading.Lock()  # one recovery at a time
        self._failure: ReplyOutcome | None = None
        self.reloads = 0
        self.reloading = False
        self._channel: SlotChannel | None = None
        if parallel > 1:
            self._open_channel()

    # -- the model -------------------------------------------------------------------------------

    @property
    def model(self) -> LoadedModel:
        model = self.session.model
        if model is None:
            raise unavailable("no model is loaded: the engine is being reloaded, try again shortly", "no_model", 5)
        return model

    def context_limit(self) -> int:
        """The most tokens one request's prompt and reply may take together."""
        if self._channel is not None:
            return self._channel.n_ctx_seq
        model = self.model
        return model.max_ctx if self.session.elastic else model.n_ctx

    def _open_channel(self) -> None:
        from app.engine.process import EngineProcess
        from app.engine.slot_channel import SlotChannel

        engine = self.session.engine
        if not isinstance(engine, EngineProcess):
            raise EngineError("parallel replies need the engine process")
        self._channel = SlotChannel(engine)

    def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()

    # -- prompts (worker thread) -----------------------------------------------------------------

    def _tokenize(self, text: str) -> list[int]:
        if self._channel is not None:
            return self._channel.tokenize(text)
        return self.session.engine.tokenize(text)

    def _tokenize_text(self, text: str, add_special: bool) -> list[int]:
        if self._channel is not None:
            return self._channel.tokenize(text, add_special, False)
        return self.session.engine.tokenize(text, add_special, False)

    def prepare_chat(self, request: ChatRequest) -> Prepared:
        self.ensure_ready()
        model = self.model
        media = self.session.engine.tokenize_media if self._channel is None else None
        try:
            prepared = chat_prompt(request, model, self._tokenize, media)
        except EngineError as exc:
            raise self._engine_failed(exc) from None
        if isinstance(prepared.prompt, MediaPrompt) and self._channel is not None:
            raise bad_request("images are read one request at a time: serve without --parallel to send them")
        return prepared

    def prepare_completion(self, request: CompletionRequest) -> Prepared:
        self.ensure_ready()
        model = self.model
        try:
            if request.suffix is not None:
                if request.json_reply is not None:
                    raise bad_request("a gap is filled with code, not JSON: send 'suffix' or 'response_format'")
                fim = model.report.fim_tokens
                return infill_prompt(request.prompt, request.suffix, fim, model.report.n_vocab, self._tokenize_text)
            return completion_prompt(request.prompt, model.report.n_vocab, self._tokenize, request.json_reply)
        except EngineError as exc:
            raise self._engine_failed(exc) from None

    def params(self, sampling: Sampling, prepared: Prepared, completion: bool = False) -> GenerationParams:
        """The reply's sampling by the one rule (app.conversation.sampling.reply_sampling), its length fitted to the
        context: a prompt or a max_tokens the context cannot hold is refused with both counts."""
        model = self.model
        fmt = dataclasses.replace(model.fmt, stop=()) if completion else model.fmt  # a completion is raw text
        params = reply_sampling(
            sampling.asked, self.defaults.server, self.defaults.user, model.anatomy.metadata, fmt, sampling.stop
        )
        params = dataclasses.replace(
            params,
            presence_penalty=sampling.presence_penalty,
            frequency_penalty=sampling.frequency_penalty,
            grammar=prepared.grammar,
            logit_bias=self._biases(sampling.logit_bias, model.report.n_vocab),
            top_logprobs=sampling.top_logprobs,
        )
        limit = self.context_limit()
        what = "a slot's context" if self._channel is not None else "the context"
        if prepared.n_tokens >= limit:
            raise ApiError(
                400,
                f"the prompt has {prepared.n_tokens:,} tokens and {what} holds {limit:,}: shorten the messages"
                + ("" if self._channel is None else " (or serve with fewer --parallel slots)"),
                code="context_length_exceeded",
                param="messages",
            )
        room = limit - prepared.n_tokens
        if sampling.max_tokens_given and params.max_tokens > room:
            raise ApiError(
                400,
                f"max_tokens is {params.max_tokens:,} but {what} holds {limit:,} tokens and the prompt takes "
                f"{prepared.n_tokens:,}: at most {room:,} are left for the reply",
                code="context_length_exceeded",
                param="max_tokens",
            )
        return dataclasses.replace(params, max_tokens=min(params.max_tokens, room))

    @staticmethod
    def _biases(asked: tuple[tuple[int, float], ...], n_vocab: int) -> tuple[tuple[int, float], ...]:
        bad = next((token for token, _ in asked if not 0 <= token < n_vocab), None)
        if bad is not None:
            raise bad_request(
                f"logit_bias: token id {bad} is not in the model's vocabulary (0 to {n_vocab - 1:,})",
                param="logit_bias",
            )
        return asked

    # -- replies (worker thread) -----------------------------------------------------------------

    def run(self, job: Job, prepared: Prepared, params: GenerationParams) -> None:
        """Run the reply; its events go to `job`. Never raises."""
        try:
            stats = self._run_slot(job, prepared, params) if self._channel else self._run_one(job, prepared, params)
        except ApiError as exc:
            job.put("error", exc)
            return
        except EngineError as exc:
            job.put("error", self._engine_failed(exc))
            return
        except Exception as exc:  # a bug: the client gets words, the server goes on
            job.put("error", server_error(f"the reply failed: {type(exc).__name__}: {exc}", "internal_error"))
            return
        self.reloads = 0
        job.stats = stats
        job.put("done", stats)

    def _run_one(self, job: Job, prepared: Prepared, params: GenerationParams) -> GenerationStats:
        session = self.session
        with self._turn:
            if job.cancelled.is_set():
                return GenerationStats(prompt_tokens=prepared.n_tokens, stopped_by="user")
            model = self.model
            needed = prepared.n_tokens + params.max_tokens
            growth = session.grow_for(needed)
            if growth is not None:
                self._note(
                    f"the context grew from {growth.before:,} to {growth.after:,} tokens"
                    + (f" (not further: {growth.error})" if growth.error else "")
                )
            if needed > model.n_ctx:  # it could not grow that far: the reply gets the room there is
                if prepared.n_tokens >= model.n_ctx:
                    raise ApiError(
                        400,
                        f"the prompt has {prepared.n_tokens:,} tokens and the context could only hold "
                        f"{model.n_ctx:,} now (memory is short)",
                        code="context_length_exceeded",
                    )
                params = dataclasses.replace(params, max_tokens=model.n_ctx - prepared.n_tokens)
            engine = session.engine
            session.generating.set()
            job.stops_with(engine.stop)
            try:
                sent = 0  # the tokens' log-probabilities passed on so far
                for piece in engine.generate(prepared.prompt, params):
                    stats = engine.last_stats
                    job.put("piece", (piece, stats.generated_tokens, stats.logprobs[sent:]))
                    sent = len(stats.logprobs)
                    if job.cancelled.is_set():
                        engine.stop()
            finally:
                job.stops_with(None)
                session.generating.clear()
            session.reply_finished()  # (not the chat's pace: a request is no turn of its conversation)
            return engine.last_stats

    def _run_slot(self, job: Job, prepared: Prepared, params: GenerationParams) -> GenerationStats:
        channel = self._channel
        assert channel is not None and isinstance(prepared.prompt, list)
        if job.cancelled.is_set():
            return GenerationStats(prompt_tokens=prepared.n_tokens, stopped_by="user")
        reply = channel.start(prepared.prompt, params)
        job.stops_with(reply.cancel)
        try:
            sent = 0
            for piece in reply.pieces():
                job.put("piece", (piece, reply.stats.generated_tokens, reply.stats.logprobs[sent:]))
                sent = len(reply.stats.logprobs)
        finally:
            job.stops_with(None)
        return reply.stats

    # -- failures and recovery -------------------------------------------------------------------

    def _engine_failed(self, exc: EngineError) -> ApiError:
        """The words for a client whose reply the engine failed, and the recovery the next request finds."""
        if isinstance(exc, EngineCrashed):
            self._failure = ReplyOutcome(CRASHED, "", GenerationStats(stopped_by=ENGINE_CRASH), str(exc), exc)
            self._note(f"the engine stopped: {exc}")
            return unavailable(f"{exc} The model is being loaded again: try again shortly.", "engine_crashed", 5)
        memory = classify(str(exc), exc.log, self.session.gpu_names, exc.status).memory
        if memory:
            self._failure = ReplyOutcome(OUT_OF_MEMORY, "", GenerationStats(stopped_by="error"), str(exc), exc)
            self._note(f"out of memory: {exc}")
            return unavailable(f"{exc} A smaller plan is being loaded: try again shortly.", "out_of_memory", 5)
        return server_error(str(exc))

    def ensure_ready(self) -> None:
        """Reload the model when the engine was lost (a crash, a stall, killed while idle)."""
        with self._ready:
            if not self.recovers:  # the app's chat screen hears of a lost engine and loads it again
                self._failure = None
                if self.session.model is None or not self.session.engine.loaded:
                    raise unavailable("the engine stopped: the app is loading the model again", "engine_stopped", 5)
                return
            channel = self._channel
            if self._failure is None and channel is not None and channel.crash is not None:
                crash = channel.crash
                self._failure = ReplyOutcome(CRASHED, "", GenerationStats(stopped_by=ENGINE_CRASH), str(crash), crash)
            if self._failure is None and channel is None:
                self._failure = self.session.engine_lost()
            if self._failure is None:
                return
            failure, self._failure = self._failure, None
            if self.reloads >= MAX_RELOADS:
                self._failure = failure
                raise unavailable(
                    f"the engine failed {self.reloads} times in a row ({failure.error}); restart vramchat serve, "
                    "perhaps with a smaller plan (--ctx, --ngl)",
                    "engine_failed",
                    30,
                )
            self.reloads += 1
            self._reload(failure)

    def _reload(self, failure: ReplyOutcome) -> None:
        from app.session import LoadFailed

        session = self.session
        self.close()
        recovery = session.recover(failure)
        if recovery is None:
            return
        self.reloading = True
        self._note(f"{recovery.title}: {recovery.status}")
        try:
            known = session.devices
            assert known is not None  # a model was loaded: its devices are known

            def same_devices() -> DeviceReport:
                return known

            model, lost = session.carry_out(recovery, self._reprobe or same_devices)
        except (LoadFailed, EngineError) as exc:
            self._failure = failure
            raise unavailable(f"the model could not be loaded again: {exc}", "reload_failed", 30) from None
        finally:
            self.reloading = False
        if lost:
            self._note(f"loaded again without {', '.join(lost)}")
        if model.changes:
            self._note(f"loaded again with a smaller plan: {'; '.join(model.changes)}")
        else:
            self._note("loaded again")
        if self.parallel > 1:
            self._open_channel()

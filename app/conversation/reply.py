"""One reply, from the conversation to the saved text: what the chat screen's worker calls.

`write_reply` fits the prompt into the context, streams the reply through the
engine (wherever it runs), saves it as it grows (`ReplySink`: at most every half second,
so a crash keeps what was already shown) and says how it ended. It
touches no widget: the caller passes callbacks for the prompt's fit and for each
piece, and gets a `ReplyOutcome` whose `kind` tells the screen what to do next.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from app.attachments import MediaError
from app.conversation.outcome import CRASHED, ENGINE_CRASH, FAILED, OK, OUT_OF_MEMORY, REFUSED, ReplyOutcome
from app.conversation.prompt import ChatError, PromptBuild, build_prompt
from app.conversation.reasoning import ThoughtClock, opened_marker, template_switches
from app.conversation.templates import ChatMessage, stops_in_use
from app.engine.crash import EngineCrashed
from app.engine.failure import classify
from app.engine.types import EngineError, GenerationParams, GenerationStats, Media, MediaPrompt, PromptProgress
from app.speed import learn_from_reply
from app.store import Store

if TYPE_CHECKING:
    from app.session import Growth, ModelSession


class ReplySink:
    """Collects a streaming reply and saves it to the store at most every `interval` seconds."""

    def __init__(self, store: Store | None, msg_id: int, interval: float = 0.5) -> None:
        self.store, self.msg_id, self.interval = store, msg_id, interval
        self.text = ""
        self._saved_len = 0
        self._last_save = time.monotonic()

    def add(self, piece: str) -> None:
        self.text += piece
        now = time.monotonic()
        if self.store is not None and now - self._last_save >= self.interval and len(self.text) != self._saved_len:
            self.store.update_reply(self.msg_id, self.text)
            self._saved_len, self._last_save = len(self.text), now

    def finish(self, stopped_by: str, tokens: int = 0, tps: float = 0.0) -> str:
        text = self.text.strip()
        if self.store is not None:
            self.store.finish_reply(self.msg_id, text, stopped_by, tokens, tps)
        return text


def write_reply(
    session: ModelSession,
    store: Store | None,
    msg_id: int,
    turns: list[ChatMessage],
    system: str,
    params: GenerationParams,
    cancelled: threading.Event,
    on_fitted: Callable[[PromptBuild], None],
    on_piece: Callable[[str], None],
    on_growth: Callable[[Growth], None] | None = None,
    media: Callable[[str], Media] | None = None,
    on_done: Callable[[ReplyOutcome], None] | None = None,
    on_progress: Callable[[PromptProgress], None] | None = None,
    thinking: bool = True,
) -> ReplyOutcome:
    """Build the prompt, stream the reply into `msg_id`, and say how it ended. Never raises for
    what the engine does: a crash or an error keeps what was written, marked cut short.

    When the context grows with the conversation, the prompt is fitted to the plan's maximum and
    the context made large enough first (`on_growth` is told); if it cannot grow, the prompt is
    fitted to the context there is, dropping the oldest turns. Images in the turns go to the
    projector when one is loaded (`media` gives each one's pixels by its id). `on_done` is told the
    outcome as soon as the reply has ended, before its speed is learned (app/speed.py); `on_progress` what
    the engine says while it reads the prompt.

    A reasoning model's thoughts (app/conversation/reasoning.py) are saved and streamed with the reply, markers
    included: where the template opened the block, the reply starts with its opening marker as if the model
    wrote it. `thinking` is the chat's switch, for a template that reads `enable_thinking`."""

    def _run() -> ReplyOutcome:
        model = session.model
        assert model is not None
        engine = session.engine
        sink = ReplySink(store, msg_id)
        clock = ThoughtClock(time.perf_counter)
        switches = template_switches(model.fmt.template, thinking) if model.fmt.kind == "jinja" else {}
        session.generating.set()
        try:
            if turns and turns[-1].media and not model.marker:
                raise ChatError(
                    f"{model.name} was loaded without a vision projector, so it cannot see images. Load it with its "
                    "projector (the picker's Vision setting; --mmproj on the command line), or send the words alone."
                )
            marker = model.marker if media is not None else ""

            def tokenize_media(text: str, ids: tuple[str, ...]) -> list[int]:
                assert media is not None
                return engine.tokenize_media(MediaPrompt(text, tuple(media(i) for i in ids)))

            def fitted(n_ctx: int) -> PromptBuild:
                return build_prompt(
                    model.fmt,
                    system,
                    turns,
                    n_ctx,
                    params.max_tokens,
                    engine.tokenize,
                    model.eos,
                    marker,
                    tokenize_media,
                    switches,
                )

            build = fitted(model.max_ctx if session.elastic else model.n_ctx)
            growth = session.grow_for(len(build.tokens) + build.reply_room)
            if growth is not None and on_growth is not None:
                on_growth(growth)
            if len(build.tokens) + build.reply_room > model.n_ctx:  # the context could not grow that far
                build = fitted(model.n_ctx)
            on_fitted(build)
            prompt: list[int] | MediaPrompt = build.tokens
            if build.media and media is not None:
                prompt = MediaPrompt(build.text, tuple(media(i) for i in build.media))
            if cancelled.is_set():
                stats = GenerationStats(stopped_by="user")
            else:
                opened = opened_marker(build.text)  # the template wrote `<think>`: the reply starts inside it
                if opened:
                    sink.add(opened)
                    on_piece(opened)
                    clock.opened(opened)
                # after the render: a template that was stopped adds its fallback format's stops
                run = replace(params, stop=tuple(dict.fromkeys(params.stop + stops_in_use(model.fmt))))
                for piece in engine.generate(prompt, run, on_progress):
                    sink.add(piece)
                    on_piece(piece)
                    clock.saw(piece, engine.last_stats.generated_tokens)
                    if cancelled.is_set():
                        engine.stop()  # the engine clears stop requests made before it started
                stats = engine.last_stats
                if opened and sink.text == opened:  # stopped before the first token: no reply, not an empty thought
                    sink.text = ""
                session.pace.record(len(build.tokens) + stats.generated_tokens, turns=len(turns))
            text = sink.finish(stats.stopped_by, stats.generated_tokens, stats.tokens_per_second)
            session.reply_finished()
            return ReplyOutcome(OK, text, stats, thought=clock.finish(stats.generated_tokens))
        except (ChatError, MediaError) as exc:
            if store is not None:
                store.delete_message(msg_id)
            return ReplyOutcome(REFUSED, "", GenerationStats(stopped_by="error"), str(exc))
        except EngineCrashed as exc:
            text = sink.finish(ENGINE_CRASH)
            return ReplyOutcome(CRASHED, text, GenerationStats(stopped_by=ENGINE_CRASH), str(exc), exc)
        except EngineError as exc:
            text = sink.finish("error")
            # the devices the session loaded the model on say which buffers a failure names are a GPU's
            memory = classify(str(exc), exc.log, session.gpu_names, exc.status).memory
            return ReplyOutcome(
                OUT_OF_MEMORY if memory else FAILED,
                text,
                GenerationStats(stopped_by="error"),
                str(exc),
                exc if memory else None,
            )
        except Exception as exc:  # a template failure, say: keep what was written
            text = sink.finish("error")
            return ReplyOutcome(FAILED, text, GenerationStats(stopped_by="error"), str(exc) or type(exc).__name__)
        finally:
            session.generating.clear()

    outcome = _run()
    if on_done is not None:
        on_done(outcome)
    if outcome.kind == OK:
        learn_from_reply(session, outcome.stats)  # the speed against its prediction, for later plans
    return outcome

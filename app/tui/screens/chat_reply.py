"""The reply being written on the chat screen: its view in the message list, the thread worker that writes
it (app.conversation.reply.write_reply, run on the screen, whose messages it posts), and Esc's stop.

The chat screen makes one `ReplyWriter` and hands it what the worker posts: the pieces, the reading of
the prompt and the outcome, which the view shows. What an outcome calls for beyond its view (a receipt,
a recovery, the status lines) stays the screen's.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.message import Message

from app.conversation.outcome import REFUSED, empty_reply_marker
from app.conversation.prompt import to_messages
from app.conversation.reply import write_reply
from app.conversation.sampling import sampling_json
from app.tui.messages import ContextResized, PromptFitted, PromptRead, ReplyFinished, ReplyPiece
from app.tui.widgets.chat.message_select import MessageList
from app.tui.widgets.chat.notes import empty_reply_words, prompt_note, reply_note
from app.tui.widgets.chat.pictures import AttachedPictures
from app.tui.widgets.message_view import MessageView

if TYPE_CHECKING:
    from textual.screen import Screen

    from app.attachments import MediaShelf
    from app.conversation.templates import ChatMessage
    from app.engine.types import GenerationParams
    from app.tui.screens.chat_controller import ChatController
    from app.tui.services import Services


class ReplyWriter:
    def __init__(self, screen: Screen[Any], services: Services, chat: ChatController) -> None:
        self.screen, self.services, self.chat = screen, services, chat
        self.writing = False  # a reply is being written (from its start to its outcome)
        self.view: MessageView | None = None  # the reply's view while it is written
        self.msg_id = 0  # the reply's message in the store
        self._cancel = threading.Event()  # Esc pressed before the engine started this reply

    async def start(self, beside: int | None = None) -> None:
        """A reply to the chat on screen (`beside`: a retry, kept beside that earlier reply)."""
        services, conversation = self.services, self.chat.conversation
        assert conversation is not None
        store = services.store
        model = services.session.model
        assert model is not None, "a reply is asked for only with a model loaded"
        params = self.chat.params()  # the chat's own sampling, else the user's, else the model's
        msg_id = store.begin_reply(conversation.id, beside, sampling_json(params))  # kept with the reply
        conv = store.conversation(conversation.id)
        turns = to_messages(conv.messages)  # the new reply, empty yet, is left out
        place = (conv.messages[-1].alternative, conv.messages[-1].alternatives)
        view = MessageView("assistant", "", author=model.name, note="…", msg_id=msg_id, place=place)
        self.view, self.msg_id = view, msg_id
        messages = self.screen.query_one(MessageList)
        messages.follow()
        self.writing = True
        self._cancel.clear()
        await messages.mount(view)
        shelf = self.screen.query_one(AttachedPictures).shelf(conv.messages)  # for a model that sees
        self.screen.run_worker(
            partial(self._write, msg_id, turns, conv.system_prompt, params, shelf),
            name="_generate",
            group="generate",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    def stop(self) -> None:
        """Esc: the reply ends where it is (before it started: it never starts)."""
        self._cancel.set()
        self.services.session.stop()

    def _post(self, message: Message) -> None:
        """post_message for callbacks that return nothing (whether it was queued does not matter)."""
        self.screen.post_message(message)

    def _write(
        self, msg_id: int, turns: list[ChatMessage], system: str, params: GenerationParams, shelf: MediaShelf | None
    ) -> None:
        session = self.services.session
        write_reply(
            session,
            self.services.store,
            msg_id,
            turns,
            system,
            params,
            self._cancel,
            on_fitted=lambda b: self._post(PromptFitted(len(b.tokens), b.n_ctx, b.dropped, b.near_limit, b.note)),
            on_piece=lambda piece: self._post(ReplyPiece(msg_id, piece)),
            on_growth=lambda growth: self._post(ContextResized(growth)),
            media=shelf,
            on_done=lambda outcome: self._post(ReplyFinished(msg_id, outcome, session.recover(outcome))),
            thinking=self.chat.thinking,
            on_progress=lambda progress: self._post(PromptRead(msg_id, progress)),
        )

    async def piece(self, message: ReplyPiece) -> bool:
        """A piece of the reply into its view; whether it was this reply's."""
        view = self.view
        if view is None or message.msg_id != self.msg_id:
            return False
        if view.note != "…":  # the prompt is read: the reply's own note follows at its end
            view.set_note("…")
        await view.append(message.text)
        return True

    def prompt_read(self, message: PromptRead) -> None:
        """While the prompt is read, the reply's header says how far, as the engine tells it."""
        note = prompt_note(message.progress)
        if self.view is not None and message.msg_id == self.msg_id and note is not None:
            self.view.set_note(note)

    async def end(self, message: ReplyFinished) -> bool:
        """The reply ended: its view shows the outcome. True where the chat is to be drawn again (a retry
        that was refused: the reply before it is back)."""
        outcome = message.outcome
        view = self.view if message.msg_id == self.msg_id else None
        self.writing, self.view = False, None
        if view is None:
            return False
        if outcome.kind == REFUSED:  # never sent (the message could not be put to the model): no reply to keep
            await view.remove()
            return view.place[1] > 1
        if not outcome.text:  # kept in the transcript, called what it is (the store keeps it too)
            stopped = "error" if outcome.error and not outcome.stats.stopped_by else outcome.stats.stopped_by
            await view.finish("", reply_note(outcome.stats, outcome.error), None, empty_reply_marker(stopped))
            if not outcome.error:
                title, text = empty_reply_words(outcome.stats)
                self.screen.app.notify(text, title=title, severity="information" if title == "Stopped" else "warning")
        else:
            await view.finish(outcome.text, reply_note(outcome.stats, outcome.error), outcome.thought)
        return False

"""The chat's state and what changes it, owned in one place: the chat open (the branch of its tree on screen),
the message being edited, the chats deleted this run, and the chat's own settings (with no chat open, those
the next chat starts with).

The chat screen makes one `ChatController` and its keys, the palette and the slash commands call it; it
works the widgets it needs (the message box, the message list, the chats list) and is handed what it asks
of the screen (drawing the chat again, starting or opening one, saying the status lines again). It lives
beside the screen because it opens the chat's dialogs, which are screens; no widget imports it.

Editing: `Ctrl+E` (or `e` on a marked message) puts a message of yours in the message box, whose title
says so; `Enter` sends it as a new branch from that point (an alternative to it: app.store.tree), `Esc`
drops the edit. Chats are deleted until the app next starts (`Ctrl+Z` brings one back) and renamed: the
one highlighted in the list while the list has the focus, else the open one. Settings set with no chat
open are the next chat's; the system prompt set then is also new chats' default (the settings file).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.actions import SkipAction
from textual.app import SystemCommand
from textual.widgets import Input, TextArea

from app.conversation.reasoning import DEFAULT_THINKING, can_switch, toggled_words
from app.conversation.sampling import (
    ChatSampling,
    field_name,
    model_defaults,
    parse,
    reply_sampling,
    temperature_words,
    user_defaults,
)
from app.tui.screens import chat_records
from app.tui.widgets.chat.message_select import MessageList
from app.tui.widgets.chat.past_chats import PastChats
from app.tui.widgets.chat_input import ChatInput

if TYPE_CHECKING:
    from textual.screen import Screen

    from app.attachments import Attachment
    from app.engine.types import GenerationParams
    from app.store import Conversation, StoredMessage
    from app.tui.services import Services

UNDO_SECONDS = 8  # how long the toast that offers Ctrl+Z after a deletion stays


class ChatController:
    def __init__(
        self,
        screen: Screen[Any],
        services: Services,
        *,
        busy: Callable[[], bool],
        redraw: Callable[[], Awaitable[object]],
        new_chat: Callable[[], Awaitable[None]],
        open_chat: Callable[[int], Awaitable[None]],
        changed: Callable[[], None],
    ) -> None:
        """`busy`: whether a reply is being written; `redraw`: the open chat drawn again from the store;
        `new_chat` and `open_chat` as the screen's keys do them; `changed`: the status lines said again."""
        self.screen, self.services = screen, services
        self._busy, self._redraw, self._new_chat, self._open_chat, self._changed = (
            busy,
            redraw,
            new_chat,
            open_chat,
            changed,
        )
        self.conversation: Conversation | None = None  # the chat open, as last read from the store
        self.editing: int | None = None  # the message being edited in the message box (sent as a branch)
        self.deleted: list[tuple[int, bool]] = []  # chats deleted this run, latest last: (id, was it open)
        # the sampling of the chat the next message starts (F4 with none open; --temp, --top-p ... at start)
        self.next_sampling: ChatSampling = services.options.sampling

    def _notify(self, text: str, **kwargs: Any) -> None:
        self.screen.app.notify(text, **kwargs)

    @property
    def _input(self) -> ChatInput:
        return self.screen.query_one(ChatInput)

    @property
    def _messages(self) -> MessageList:
        return self.screen.query_one(MessageList)

    @property
    def _chats(self) -> PastChats:
        return self.screen.query_one(PastChats)

    # -- the chat open --------------------------------------------------------------------------------

    def add_message(self, text: str, attachments: tuple[Attachment, ...]) -> tuple[StoredMessage, bool]:
        """The user's message written to the chat open (the first starts a chat, with the settings chosen for
        it before) before it is shown; an edit is sent as a branch beside the message edited, with its pictures
        where none are attached. The message, and whether it was an edit."""
        services = self.services
        conv = self.conversation
        if conv is None:
            model = services.session.model
            assert model is not None, "a message is sent only with a model loaded"
            conv = self.conversation = services.store.new_conversation(
                model.path, model.name, services.settings.system_prompt
            )
            if self.next_sampling != ChatSampling():
                services.store.set_settings(conv.id, self.next_sampling.to_json())
                conv.settings = self.next_sampling.to_json()
                self.next_sampling = services.options.sampling  # the command line's, for every chat it starts
        edited = self.end_edit()
        if edited is not None and not attachments:  # an edit keeps the pictures of the message it replaces
            attachments = edited.attachments
        beside = edited.id if edited is not None else None
        return services.store.add_message(conv.id, "user", text, attachments, beside), edited is not None

    def show_list(self) -> None:
        """The chats list drawn again, the open chat highlighted."""
        self._chats.show(self.conversation.id if self.conversation else None)

    def _target_chat(self) -> int | None:
        """The chat highlighted in the list while the list has the focus, else the open one."""
        chosen = self._chats.chosen()
        if chosen is not None:
            return chosen
        return self.conversation.id if self.conversation is not None else None

    # -- its settings ---------------------------------------------------------------------------------

    @property
    def sampling(self) -> ChatSampling:
        """The open chat's sampling (with none open: the next chat's)."""
        if self.conversation is None:
            return self.next_sampling
        return ChatSampling.from_json(self.conversation.settings)

    @property
    def system_prompt(self) -> str:
        if self.conversation is not None:
            return self.conversation.system_prompt
        return self.services.settings.system_prompt

    @property
    def thinking(self) -> bool:
        """The chat's thinking switch (app.conversation.reasoning): its own, else on."""
        own = self.sampling.thinking
        return DEFAULT_THINKING if own is None else own

    def params(self) -> GenerationParams:
        """What the next reply of the open chat is sampled with (app.conversation.sampling.reply_sampling: the
        chat's own, else the user's defaults, else the loaded model's, else its kind's)."""
        model = self.services.session.model
        assert model is not None, "a reply is asked for only with a model loaded"
        settings = self.services.settings
        user = user_defaults(settings.temperature, settings.max_tokens)
        return reply_sampling(ChatSampling(), self.sampling, user, model.anatomy.metadata, model.fmt)

    def status_words(self) -> tuple[str, int]:
        """For the status line: the temperature in words, saying whose it is, and the reply length."""
        model = self.services.session.model
        assert model is not None
        params = self.params()
        user = user_defaults(self.services.settings.temperature, None)
        return temperature_words(params, self.sampling, user, model.anatomy.metadata, model.fmt), params.max_tokens

    def keep(self, system_prompt: str, sampling: ChatSampling) -> None:
        """Save the chat's settings (with none open: the next chat's) and show them."""
        services = self.services
        if self.conversation is None:
            self.next_sampling = sampling
            services.settings.system_prompt = system_prompt
            services.save_settings()
        else:
            conv = self.conversation
            services.store.set_system_prompt(conv.id, system_prompt)
            services.store.set_settings(conv.id, sampling.to_json())
            conv.system_prompt, conv.settings = system_prompt, sampling.to_json()
        self._changed()

    def set_setting(self, name: str, value: str) -> str:
        """One setting of the open chat from typed words (names as app.conversation.sampling.field_name reads
        them, "system" for the system prompt; "default" unsets): the words of what was done. ValueError says
        what is wrong."""
        if name.strip().lower() in ("system", "system_prompt", "system-prompt"):
            self.keep(value.strip(), self.sampling)
            return "System prompt set for this chat." if value.strip() else "System prompt cleared for this chat."
        key = field_name(name)
        parsed = parse(key, value)
        self.keep(self.system_prompt, self.sampling.set(key, parsed))
        words = key.replace("_", " ")
        return f"{words} back to the model's own." if parsed is None else f"{words} {value.strip()} for this chat."

    def set_system_prompt(self, text: str) -> str:
        """/system TEXT: where it applies, for the toast to say ("This chat", "The next chat")."""
        self.keep(text, self.sampling)
        return self._scope()

    def set_temperature(self, value: float | None) -> str:
        """/temp VALUE (None: the model's own): where it applies, as `set_system_prompt`."""
        self.keep(self.system_prompt, self.sampling.set("temperature", value))
        return self._scope()

    def _scope(self) -> str:
        return "This chat" if self.conversation is not None else "The next chat"

    def toggle_thinking(self) -> bool:
        """F9: the chat's thinking switch turned over and kept with the chat, for a model whose template has one
        (`enable_thinking`); the toast says what it is now. False where no model is loaded to ask."""
        model = self.services.session.model
        if model is None:
            self._notify("Load a model first (F2 opens the model list).", severity="warning")
            return False
        switchable = can_switch(model.fmt)
        on = not self.thinking if switchable else True
        if switchable:
            self.keep(self.system_prompt, self.sampling.set("thinking", on))
        self._notify(toggled_words(model.name, switchable, on), title="Thinking", timeout=5)
        return True

    def open_settings(self) -> None:
        """F4: the chat's settings dialog (with none open: the next chat's)."""
        from app.tui.screens.dialogs import ChatSettings, ChatSettingsDialog

        model = self.services.session.model
        own = model_defaults(model.anatomy.metadata).changed() if model is not None else []
        note = f"{model.name} carries its own: {', '.join(own)}." if model is not None and own else ""

        def done(result: ChatSettings | None) -> None:
            if result is not None:
                self.keep(result.system_prompt, result.sampling)
                self._notify(
                    "Chat settings saved with the chat." if self.conversation else "Saved for the next chat.", timeout=2
                )

        scope = "this chat" if self.conversation is not None else "the next chat"
        current = ChatSettings(self.system_prompt, self.sampling)
        self.screen.app.push_screen(ChatSettingsDialog(current, scope, note), done)

    # -- editing and branches -------------------------------------------------------------------------

    def begin_edit(self) -> None:
        """The marked message of yours (on a reply: the message it answers; else your last one) into the
        message box, to be sent as a branch."""
        messages = self._messages
        views, focused = messages.views(), messages.focused_message
        before = views[: views.index(focused) + 1] if focused is not None else views  # a reply: what it answers
        target = next((v for v in reversed(before) if v.role == "user"), None)
        if target is None or self.conversation is None:
            self._notify("There is no message of yours to edit yet.", severity="warning")
            return
        self.editing = target.msg_id
        box = self._input
        box.load_text(target.text)
        box.show_editing(True)
        self.screen.set_focus(box)  # at once: what is typed next edits the message
        box.move_cursor(box.document.end)

    def end_edit(self) -> StoredMessage | None:
        """The edit is over (sent, or another chat opened): the message that was edited, if any."""
        msg_id, self.editing = self.editing, None
        self._input.show_editing(False)
        return self.services.store.message(msg_id) if msg_id is not None else None

    def cancel_edit(self) -> None:
        self.end_edit()
        self._input.clear()
        self._notify("Edit dropped.", timeout=2)

    async def step_alternative(self, step: int) -> None:
        """Show the alternative `step` places from the marked message's (else from the last reply's)."""
        if self._busy():
            self._notify("Wait for the reply to end (Esc stops it).", severity="warning")
            return
        messages = self._messages
        views, focused = messages.views(), messages.focused_message
        target = focused or next((v for v in reversed(views) if v.role == "assistant"), None)
        if target is None or target.place[1] <= 1:
            self._notify(
                "This message has no alternatives: Ctrl+R asks for another reply, Ctrl+E edits a message of yours.",
                timeout=4,
            )
            return
        index = views.index(target)
        if self.services.store.step_alternative(target.msg_id, step) is None:
            self.screen.app.bell()
            return
        await self._redraw()
        again = messages.views()
        if focused is not None and index < len(again):  # the focus stays where it was: on the message, or in the box
            messages.focus_message(again[index])
        self.show_list()

    # -- chats to manage ------------------------------------------------------------------------------

    def skip_while_typing(self, unless: bool = True) -> None:
        """A chat key that a text box binds too is the box's while it holds text (or when `unless` is False):
        the key goes on to it (Ctrl+E to the end of the line, say)."""
        focused = self.screen.focused
        holds_text = (isinstance(focused, TextArea) and bool(focused.text)) or (
            isinstance(focused, Input) and bool(focused.value)
        )
        if holds_text or not unless:
            raise SkipAction()

    async def delete_chat(self) -> None:
        conv_id = self._target_chat()
        if conv_id is None:
            self._notify("There is no chat to delete.", severity="warning")
            return
        is_open = self.conversation is not None and self.conversation.id == conv_id
        if is_open and self._busy():
            self._notify("Stop the reply first (Esc).", severity="warning")
            return
        store, chats = self.services.store, self._chats
        row = chats.options.highlighted if chats.chosen() is not None else None  # deleted from the list
        title = store.conversation(conv_id).title or "(empty chat)"
        store.trash_conversation(conv_id)
        self.deleted.append((conv_id, is_open))
        if is_open:
            await self._new_chat()
        self.show_list()
        if row is not None:  # the list keeps the focus, on the chat that took the deleted one's place
            chats.highlight_row(row)
            chats.options.focus()
        self._notify(f"“{title}” deleted: Ctrl+Z undoes it.", title="Chat deleted", timeout=UNDO_SECONDS)

    async def undo_delete(self) -> None:
        if not self.deleted:
            self._notify("No chat was deleted.", timeout=3)
            return
        conv_id, was_open = self.deleted.pop()
        chats = self._chats
        in_list = chats.options.has_focus
        self.services.store.restore_conversation(conv_id)
        if was_open and self.conversation is None and not self._busy():
            await self._open_chat(conv_id)
        self.show_list()
        if in_list:  # the list keeps the focus, on the chat brought back
            chats.highlight(conv_id)
            chats.options.focus()
        self._notify("The chat is back.", timeout=3)

    def rename_chat(self) -> None:
        from app.tui.screens.rename import RenameDialog

        conv_id = self._target_chat()
        if conv_id is None:
            self._notify("There is no chat to rename yet: it is named after its first message.", severity="warning")
            return
        store = self.services.store

        def renamed(name: str | None) -> None:
            if name:
                store.set_title(conv_id, name)
                if self.conversation is not None and self.conversation.id == conv_id:
                    self.conversation.title = name
                self.show_list()
                self._chats.highlight(conv_id)  # still the renamed chat: the next `d` or `r` acts on it

        self.screen.app.push_screen(RenameDialog(store.conversation(conv_id).title), renamed)

    # -- its records ----------------------------------------------------------------------------------

    def export(self) -> None:
        """Ctrl+S: the chat on screen, with its plan receipts, as Markdown and as JSON."""
        if self.conversation is None:
            self._notify("There is no chat to export yet.", severity="warning")
            return
        chat_records.export_chat(self.screen.app, self.services.store, self.conversation.id)

    def save_receipt(self, reply_id: int) -> None:
        """What the chat ran with, kept with it for the reply `reply_id`."""
        if self.conversation is not None:
            chat_records.save_receipt(self.screen.app, self.services, self.conversation.id, reply_id)

    def show_receipt(self) -> None:
        """F8: the plan receipt of the chat chosen in the list (when the list has the focus), else of the open one."""
        conv_id = self._chats.chosen()
        if conv_id is None and self.conversation is not None:
            conv_id = self.conversation.id
        if conv_id is None:
            self._notify("There is no chat yet: its receipt is kept once the model replies.", severity="warning")
            return
        chat_records.show_receipt(self.screen.app, self.services.store, conv_id)

    # -- the palette ----------------------------------------------------------------------------------

    def palette_commands(self) -> Iterator[SystemCommand]:
        """The palette's commands for a chat as a tree and for managing chats (each also has a key: F1 lists
        them). They do the work itself, not the key's action, which leaves the key to a box holding text."""
        yield SystemCommand(
            "Edit a message", "Your last (or the focused) message, sent again as a new branch (Ctrl+E)", self.begin_edit
        )
        yield SystemCommand(
            "Previous alternative",
            "Of the last reply or the focused message (Alt+Left)",
            partial(self.step_alternative, -1),
        )
        yield SystemCommand(
            "Next alternative",
            "Of the last reply or the focused message (Alt+Right)",
            partial(self.step_alternative, 1),
        )
        yield SystemCommand(
            "Focus the messages",
            "Up/Down move, Left/Right alternatives, e edits, Esc back (Alt+Up)",
            lambda: self._messages.step(-1),
        )
        yield SystemCommand("Rename this chat", "Or the one highlighted in the list (F6, r)", self.rename_chat)
        yield SystemCommand(
            "Delete this chat",
            "Or the one highlighted in the list (Delete in the list); Ctrl+Z undoes it",
            self.delete_chat,
        )
        if self.deleted:
            yield SystemCommand(
                "Undo the chat's deletion", "Bring back the chat deleted last (Ctrl+Z)", self.undo_delete
            )

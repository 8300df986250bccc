"""The chat: past chats on the left, the conversation in the middle, memory graphs on the right.

The screen draws; what it shows is owned beside it: the chat open, its edit, branches and settings by
`ChatController` (chat_controller.py), the reply being written by `ReplyWriter` (chat_reply.py), whose
thread worker streams it (app.conversation.reply); the model's load runs in the load bar's worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.worker import Worker, WorkerState

from app.attachments import Attachment
from app.conversation.prompt import chat_tokens
from app.session import Growth
from app.store import Conversation
from app.tui.messages import (
    ContextResized,
    LoadFinished,
    PromptFitted,
    PromptRead,
    ReplyFinished,
    ReplyPiece,
)
from app.tui.screens.chat_controller import ChatController
from app.tui.screens.chat_reply import ReplyWriter
from app.tui.screens.chat_slash import ask_before_sending, run_slash
from app.tui.screens.dialog_host import DialogHost
from app.tui.while_running import while_running
from app.tui.widgets.chat import slash_commands
from app.tui.widgets.chat.context_line import ContextLine
from app.tui.widgets.chat.input_recall import earlier_messages
from app.tui.widgets.chat.load_bar import LoadBar
from app.tui.widgets.chat.message_select import MessageList, copied_words
from app.tui.widgets.chat.notes import hint_words
from app.tui.widgets.chat.past_chats import PastChats
from app.tui.widgets.chat.pictures import AttachedPictures
from app.tui.widgets.chat.settings_line import SettingsLine
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.dashboard import Dashboard
from app.tui.widgets.fitting_header import FittingHeader
from app.tui.widgets.footer import AdaptiveFooter
from app.tui.widgets.message_view import MessageView
from planner.fit import FitResult
from planner.model import ModelAnatomy

ENGINE_WATCH_SECONDS = 1.0  # how often an idle engine is checked for life


if TYPE_CHECKING:
    from collections.abc import Iterator

    from app.conversation.recovery import Recovery
    from app.tui.services import Services


class ChatScreen(DialogHost):  # opens the dialogs its widgets ask for (app/tui/dialog_asks.py)
    BINDINGS: ClassVar[list[BindingType]] = [
        # the footer shows the keys a chat needs at once; F1 and the palette (Ctrl+P) list every one
        Binding("escape", "stop", "Stop"),
        Binding("f2", "app.show_picker", "Models"),
        Binding("ctrl+n", "new_chat", "New chat"),
        Binding("ctrl+r", "retry", "Retry", show=False),
        Binding("ctrl+o", "copy_reply", "Copy reply", show=False),
        # a message or code block, to copy; priority: the keys typed right after it go to the message list,
        # not to the message box they would reach before a binding it passes on had run
        Binding("ctrl+up", "select_messages", "Select", show=False, priority=True),
        Binding("ctrl+b", "toggle_chats", "Chats"),
        Binding("ctrl+g", "toggle_dashboard", "Graphs"),
        Binding("f4", "chat_settings", "Settings", show=False),
        Binding("f5", "reload_model", "Reload", show=False),
        Binding("ctrl+s", "export_chat", "Export", show=False),
        Binding("ctrl+t", "attach", "Attach picture", show=False),
        Binding("f8", "receipt", "Receipt", show=False),
        Binding("f9", "toggle_thinking", "Thinking", show=False),
        # a chat as a tree: a marked message's keys are the message list's (app.tui.widgets.chat.message_select)
        Binding("alt+up", "select_messages", "Messages", show=False, priority=True),
        # priority: the message box binds Ctrl+E (end of line), F6 and Ctrl+Z too; while it holds text they
        # are the box's (the actions skip), in an empty box they are the chat's
        Binding("ctrl+e", "edit_message", "Edit message", show=False, priority=True),
        Binding("alt+left", "alternative(-1)", "Previous alternative", show=False),
        Binding("alt+right", "alternative(1)", "Next alternative", show=False),
        # chats to manage (the controller's): the list's highlighted chat, else the open one
        Binding("f6", "rename_chat", "Rename", show=False, priority=True),
        Binding("ctrl+z", "undo_delete", "Undo delete", show=False, priority=True),
    ]

    # the panes, typed
    past_chats = getters.query_one("#chat-list-pane", PastChats)
    messages = getters.query_one("#messages", MessageList)
    context_line = getters.query_one("#context-line", ContextLine)
    pictures = getters.query_one("#attachments", AttachedPictures)
    input = getters.query_one("#input", ChatInput)
    load_bar = getters.query_one("#load-bar", LoadBar)
    settings_line = getters.query_one("#settings-line", SettingsLine)

    def __init__(self, services: Services) -> None:
        super().__init__(id="chat")
        self.services = services
        # the chat open, its edit, its settings and the chats deleted
        self.controller = ChatController(
            self,
            services,
            busy=lambda: self.generating,
            redraw=self.redraw,
            new_chat=self.action_new_chat,
            open_chat=self.open_conversation,
            changed=self.update_context_line,
        )
        self.reply = ReplyWriter(self, services, self.controller)  # the reply being written
        self.loading = False
        self.model_path = ""
        self.context_tokens = 0  # the tokens the open conversation takes in the context

    @property
    def conversation(self) -> Conversation | None:
        """The chat open (the controller's)."""
        return self.controller.conversation

    @property
    def generating(self) -> bool:
        """A reply is being written (the reply writer's)."""
        return self.reply.writing

    @property
    def pending(self) -> list[Attachment]:
        """The pictures attached to the next message."""
        return self.pictures.pending

    def compose(self) -> ComposeResult:
        yield FittingHeader()
        with Horizontal(id="chat-body"):
            yield PastChats(self.services, id="chat-list-pane")
            with Vertical(id="conversation"):
                yield LoadBar(self.services, id="load-bar")
                yield SettingsLine(id="settings-line")
                yield MessageList(id="messages")
                yield ContextLine(self.services, id="context-line")
                yield AttachedPictures(self.services, id="attachments")
                yield ChatInput(id="input")
            yield Dashboard(self.services.started_session, id="dashboard")
        yield AdaptiveFooter()

    def on_mount(self) -> None:
        self.query_one("#dashboard").border_title = "Memory"
        self.set_class(not self.services.settings.show_dashboard, "-dash-hidden")
        self.messages.anchor()
        self.refresh_chat_list()
        self._show_hint()
        self.update_context_line()
        self.set_interval(ENGINE_WATCH_SECONDS, self._watch_engine)
        self.input.recall.source = self._earlier_messages

    def _earlier_messages(self) -> Iterator[str]:
        """What Up in the message box goes back through: this chat's messages, then earlier chats'."""
        shown = [v.text for v in self.messages.views() if v.role == "user"]
        return earlier_messages(shown, self.services.store, self.conversation.id if self.conversation else None)

    def _compositor_refresh(self) -> None:
        """Under a screen that hides it (the full dashboard), the chat's changes wait for its return
        (it is repainted whole then): Textual repaints the whole screen on top for each change of
        the one under it, which made the full dashboard cost a quarter of a core while a reply
        streamed. Under a dialog (which lets it show through) it is drawn as usual."""
        top = self.app.screen
        if top is not self and not isinstance(top, ModalScreen) and top.styles.background.a == 1:
            self._compositor._dirty_regions.clear()
            self._dirty_widgets.clear()
            return
        super()._compositor_refresh()

    def _watch_engine(self) -> None:
        """An engine that ends while idle (kill -9, the OOM killer) is noticed within a second, not at
        the next send: the header and the status line say so, and the recovery policy offers a reload."""
        if self.loading or self.generating or not self.services.session_started:
            return
        session = self.services.session
        lost = session.engine_lost()
        if lost is None:
            return
        model = session.model
        self.sub_title = f"{model.name if model else 'the model'} · not loaded: the engine stopped"
        self.update_context_line()
        recovery = session.recover(lost)
        if recovery is not None:
            self.recover(recovery)

    # -- loading --------------------------------------------------------------------------------

    def _show_loading(self, subtitle: str, status: str) -> None:
        self.loading = True
        self.sub_title = subtitle
        self.load_bar.start(status)

    def begin_load(self, path: str, anatomy: ModelAnatomy, fit: FitResult, name: str) -> None:
        self.model_path = path
        self._show_loading(f"loading {name}", f"Loading {name}…")
        self.update_context_line()
        self.load_bar.load(path, anatomy, fit)

    def recover(self, recovery: Recovery) -> None:
        """A reply failed in a way a reload may cure: the load bar says what happened, then this does
        what the session's policy says (asking first when nothing points to a cure)."""
        if self.services.session.model is None:
            return

        def answer(reload: bool) -> None:
            if reload:
                self._begin_recovery(recovery)
            else:
                self.update_context_line()

        self.load_bar.ask(recovery, answer)

    def _begin_recovery(self, recovery: Recovery) -> None:
        model = self.services.session.model
        if model is None:
            return
        self._show_loading(f"reloading {model.name}", f"{model.name}: {recovery.status}")
        self.load_bar.recover(recovery)

    def action_reload_model(self) -> None:
        if self.loading or self.generating:
            self.app.notify("Wait for the load or the reply to end (Esc stops a reply).", severity="warning")
            return
        model = self.services.session.model
        if model is None:
            self.app.notify("No model to reload: F2 opens the model list.", severity="warning")
            return
        self.begin_load(model.path, model.anatomy, model.fit, model.name)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            if event.worker.group == "generate":
                self.reply.writing = False
            self.services.report_worker_error(event.worker)

    def on_load_bar_failed(self) -> None:
        self.loading = False

    @while_running
    def on_load_finished(self, message: LoadFinished) -> None:
        """After the load bar's own (it hides; a failed load is explained, the model list comes back)."""
        self.loading = False
        if message.error:
            self.sub_title = "no model loaded"
            self.update_context_line()
            return
        model = self.services.session.model
        if model is None:  # unloaded meanwhile (the engine lost): the status line says so
            self.update_context_line()
            return
        self.sub_title = (
            f"{model.name} · {model.n_ctx:,} tokens"
            if model.n_ctx >= model.max_ctx
            else f"{model.name} · {model.n_ctx:,} of {model.max_ctx:,} tokens"
        )
        self.load_bar.tell_loaded(model, chat_open=self.conversation is not None)
        self.input.offer_pictures(model.sees)
        self._show_hint()
        self.context_tokens = 0  # a new engine holds nothing yet: what the open chat takes, counted
        self._count_context()
        self.update_context_line()
        self.input.focus()

    # -- sending and streaming ------------------------------------------------------------------

    @on(ChatInput.Submitted)
    async def _submitted(self, event: ChatInput.Submitted) -> None:
        from app.attachments import paths_in

        text = event.text.strip()
        slash = slash_commands.parse(text)
        if slash is not None and slash.command is not None:
            self.input.clear()
            await run_slash(self.controller, slash, self.run_action, self.image_command)
            return
        dropped = paths_in(text)
        if dropped:  # a terminal that types a dropped file's path rather than pasting it
            self.input.clear()
            self.attach(dropped)
            return
        if slash is not None:  # "/foo": asked about, not sent at once
            ask_before_sending(self.controller, slash, text, self.send_message)
            return
        self.send_message(text)

    def send_message(self, text: str) -> None:
        """Send `text` (with the pictures attached) when a model can answer."""
        if not text and not self.pending:
            return
        if not self._ready_to_generate():
            return
        self.input.clear()
        self.run_worker(self._send(text), exclusive=False)

    # -- pictures attached to the next message --------------------------------------------------------

    def image_command(self, rest: str) -> None:
        """`/image PATH [PATH...]` attaches, `/image` alone opens the file dialog, `/image clear` drops them."""
        if not self.pictures.command(rest):
            self.action_attach()

    @on(ChatInput.FilesPasted)
    def _pasted(self, event: ChatInput.FilesPasted) -> None:
        self.attach(event.paths)

    def action_attach(self) -> None:
        from app.tui.screens.attach import AttachDialog

        def chosen(path: str | None) -> None:
            if path:
                self.attach([path])

        self.app.push_screen(AttachDialog(), chosen)

    def attach(self, paths: list[str]) -> None:
        self.pictures.attach(paths)

    @on(AttachedPictures.Kept)
    def _kept(self) -> None:
        self.input.focus()

    def _ready_to_generate(self) -> bool:
        if self.loading:
            self.app.notify("The model is still loading.", severity="warning")
            return False
        if self.services.session.model is None:
            self.app.notify("Load a model first (F2 opens the model list).", severity="warning")
            return False
        if not self.services.session.engine.loaded:
            self.app.notify("The engine stopped: press F5 to reload the model.", severity="warning")
            return False
        if self.generating:
            self.app.notify("A reply is being written: wait, or press Esc to stop it.", severity="warning")
            return False
        return True

    async def _send(self, text: str) -> None:
        attachments = tuple(self.pending)
        msg, edited = self.controller.add_message(text, attachments)  # written before it is shown
        self.pictures.clear()
        self.messages.follow()  # what was sent, and its reply, in view whatever was read or marked before
        await self.messages.remove_hint()
        if edited:  # a branch from the edited message: what followed it is no longer on screen
            await self.redraw()
        else:
            view = MessageView("user", text, msg_id=msg.id, pictures=self.pictures.pictures(attachments))
            await self.messages.mount(view)
        self.refresh_chat_list()
        await self.reply.start()

    @while_running
    def on_context_resized(self, message: ContextResized) -> None:
        model = self.services.session.model
        if model is None:
            return
        self.context_line.tell_resized(message.growth)
        self.sub_title = f"{model.name} · {model.n_ctx:,} of {model.max_ctx:,} tokens"
        self.update_context_line()

    @while_running
    def on_prompt_fitted(self, message: PromptFitted) -> None:
        self.context_tokens = message.tokens
        self.update_context_line()
        self.context_line.tell_fitted(message)

    @while_running
    async def on_reply_piece(self, message: ReplyPiece) -> None:
        if await self.reply.piece(message):
            self._count_cells_used()

    @while_running
    def on_prompt_read(self, message: PromptRead) -> None:
        self.reply.prompt_read(message)

    @while_running  # quit while it streamed: the reply is in the store (the worker wrote it), its widgets gone
    async def on_reply_finished(self, message: ReplyFinished) -> None:
        outcome = message.outcome
        if await self.reply.end(message):  # a retry refused: the reply before it is back
            await self.redraw()
        if outcome.text:
            self.controller.save_receipt(message.msg_id)
        self._count_cells_used()
        if message.recovery is not None:
            self.recover(message.recovery)
        elif outcome.error:
            self.app.notify(outcome.error, title="The reply failed", severity="error", timeout=10)
        self.update_context_line()
        self.refresh_chat_list()

    # -- actions --------------------------------------------------------------------------------

    def action_stop(self) -> None:
        if self.has_class("-chats-open"):  # Esc closes the drawer first
            self.action_toggle_chats()
            return
        if self.controller.editing is not None and not self.generating:  # Esc drops an edit
            self.controller.cancel_edit()
            return
        if self.generating:
            self.reply.stop()
        elif self.loading:
            self.services.session.stop()
            self.app.notify("Cancelling the load…", timeout=2)

    async def action_new_chat(self) -> None:
        if self.generating:
            self.app.notify("Stop the reply first (Esc).", severity="warning")
            return
        self.controller.conversation = None
        self.context_tokens = 0
        self.services.session.pace.reset()  # the runway's tokens a turn are each chat's own
        await self.messages.remove_children()
        self._show_hint()
        self.update_context_line()
        self.input.focus()
        if self.services.session.model is not None and not self.loading:
            self._shrink()

    @work(thread=True, exclusive=True, group="generate", exit_on_error=False)
    def _shrink(self) -> None:
        """A new chat gives the memory a long conversation took back: the context returns to its start."""
        try:
            growth = self.services.session.shrink()
        except Exception as exc:  # the engine is gone, say: the next reply or F5 says so
            self.post_message(ContextResized(Growth(0, 0, 0.0, str(exc))))
            return
        if growth is not None:
            self.post_message(ContextResized(growth))

    async def action_retry(self) -> None:
        if not self._ready_to_generate() or self.conversation is None:
            return
        store = self.services.store
        conv = store.conversation(self.conversation.id)
        if not conv.messages:
            return
        last = conv.messages[-1]
        beside = None
        if last.role == "assistant":  # kept: the new reply is its alternative ("‹ 2/2 ›", Alt+Left steps back)
            beside = last.id
            for v in [v for v in self.messages.views() if v.msg_id == last.id]:
                await v.remove()
        if not any(m.role == "user" for m in conv.messages):
            return
        await self.reply.start(beside)

    def action_copy_reply(self) -> None:
        replies = [v for v in self.messages.views() if v.role == "assistant" and v.text]
        if not replies:
            self.app.notify("There is no reply to copy yet.", severity="warning")
            return
        # the answer as written, fences and all, as peers' copy buttons do (a code block alone is
        # Ctrl+Up's); a thinking model's reasoning stays out
        answer = replies[-1].answer
        self.app.copy_to_clipboard(answer)
        self.app.notify(copied_words(answer, "assistant"), timeout=3)

    def action_select_messages(self) -> None:
        """Move the focus to the messages: Up and Down mark one (or a code block), c copies it."""
        views = self.messages.views()
        if not views:
            self.app.notify("There is no message to select yet.", severity="warning")
            return
        self.messages.focus_message(views[-1])  # at once: the keys typed next are the list's, not the message box's

    @on(MessageList.Leave)
    def _left_messages(self) -> None:
        self.input.focus()

    def action_toggle_chats(self) -> None:
        """Beside the conversation from 150 columns; below, a drawer over it (Ctrl+B or Esc closes it)."""
        if self.has_class("-wide"):
            self.toggle_class("-chats-hidden")
            return
        self.toggle_class("-chats-open")
        if self.has_class("-chats-open"):
            self.past_chats.options.focus()
        else:
            self.input.focus()

    def action_toggle_dashboard(self) -> None:
        """The memory panel beside the chat; below 100 columns there is no room: the full dashboard."""
        if self.has_class("-narrow"):
            self.app.call_later(self.app.run_action, "dashboard")
            return
        self.toggle_class("-dash-hidden")
        self.services.settings.show_dashboard = not self.has_class("-dash-hidden")
        self.services.save_settings()

    def action_chat_settings(self) -> None:
        self.controller.open_settings()

    def action_toggle_thinking(self) -> None:
        if self.controller.toggle_thinking():
            self._count_context()

    # -- past chats -----------------------------------------------------------------------------

    def refresh_chat_list(self) -> None:
        self.controller.show_list()

    def action_export_chat(self) -> None:
        self.controller.export()

    def action_receipt(self) -> None:
        self.controller.show_receipt()

    @on(OptionList.OptionSelected, "#chat-list")
    async def _open_chat(self, event: OptionList.OptionSelected) -> None:
        if self.generating:
            self.app.notify("Stop the reply first (Esc).", severity="warning")
            return
        if event.option.id is None:
            return
        await self.open_conversation(int(event.option.id))

    async def open_conversation(self, conv_id: int) -> None:
        self.controller.end_edit()
        self.services.session.pace.reset()  # the runway's tokens a turn are each chat's own
        conv = await self.redraw(conv_id)
        model = self.services.session.model
        if model is not None and conv.model_path and conv.model_path != model.path:
            self.app.notify(
                f"This chat was held with {conv.model_name}; replies now come from {model.name}.", timeout=5
            )
        self.update_context_line()
        self.input.focus()

    async def redraw(self, conv_id: int | None = None) -> Conversation:
        """Draw the chat (this one, or `conv_id`) anew from the store: the branch on screen, counted again."""
        assert conv_id is not None or self.conversation is not None
        conv = self.services.store.conversation(conv_id if conv_id is not None else self.conversation.id)  # type: ignore[union-attr]
        self.controller.conversation = conv
        if not await self.messages.show_branch(conv, self.pictures.pictures):
            self._show_hint()
        self.context_tokens = 0
        self._count_context()
        return conv

    # -- branches and chats to manage: the controller's ---------------------------------------------------

    async def action_alternative(self, step: int) -> None:
        await self.controller.step_alternative(step)

    def action_edit_message(self) -> None:
        self.controller.skip_while_typing()
        self.controller.begin_edit()

    async def action_delete_chat(self) -> None:
        await self.controller.delete_chat()

    async def action_undo_delete(self) -> None:
        self.controller.skip_while_typing(unless=bool(self.controller.deleted))
        await self.controller.undo_delete()

    def action_rename_chat(self) -> None:
        self.controller.skip_while_typing()
        self.controller.rename_chat()

    @work(thread=True, exclusive=True, group="count", exit_on_error=False)
    def _count_context(self) -> None:
        """The open conversation's tokens in the loaded model's format (the engine tokenizes)."""
        session = self.services.session
        model, conversation = session.model, self.conversation
        if model is None or conversation is None or self.generating or self.loading:
            return
        stored = self.services.store.conversation(conversation.id)
        shelf = self.pictures.shelf(stored.messages)
        try:
            count = chat_tokens(session, stored, shelf, self.controller.thinking)
        except Exception:  # the engine is gone, say: the next reply says so
            return
        self.app.call_from_thread(self._counted, conversation.id, count)

    def _counted(self, conversation_id: int, count: int) -> None:
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.context_tokens = count
            self.update_context_line()

    # -- status ---------------------------------------------------------------------------------

    def _show_hint(self) -> None:
        self.messages.show_hint(hint_words(self.services.session.model, self.loading))

    def _count_cells_used(self) -> None:
        """During a chat the context count is the KV cells llama.cpp uses: the prompt and the reply so far
        (what reopening the chat counts again); a stopped engine's nothing leaves the count as it was."""
        used = self.services.session.engine.kv_cells_used()
        if used > 0 and used != self.context_tokens:
            self.context_tokens = used
            self.update_context_line()

    def update_context_line(self) -> None:
        system = self.conversation.system_prompt if self.conversation else None
        loaded = self.services.session_started and self.services.session.model is not None
        sampling = self.controller.status_words() if loaded else None
        self.context_line.show_context(self.context_tokens, system, self.loading, sampling)
        self.settings_line.show_settings(self.controller.system_prompt, self.controller.sampling)

"""The chat: past chats on the left, the conversation in the middle, memory graphs on the right.

Loading and generation run in thread workers. The generation worker builds the
prompt (dropping old turns when the context is nearly full), streams the reply,
and saves it as it grows; the UI only renders what the worker posts.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, ClassVar

from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import OptionList, Static
from textual.worker import Worker, WorkerState

from app.attachments import Attachment
from app.conversation.outcome import REFUSED, empty_reply_marker
from app.conversation.prompt import conversation_tokens, to_messages
from app.conversation.reasoning import can_switch, template_switches, toggled_words
from app.conversation.reply import write_reply
from app.conversation.sampling import sampling_json
from app.conversation.templates import ChatMessage
from app.engine import GenerationParams
from app.engine.failure import first_line
from app.engine.types import MediaPrompt
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
from app.tui.screens.chat_slash import ask_before_sending, run_slash
from app.tui.widgets.chat import branching, chat_settings, manage, records, slash_commands
from app.tui.widgets.chat.chat_settings import SettingsLine
from app.tui.widgets.chat.context_line import ContextLine
from app.tui.widgets.chat.input_recall import earlier_messages
from app.tui.widgets.chat.load_bar import LoadBar
from app.tui.widgets.chat.message_select import MessageList, copied_words
from app.tui.widgets.chat.notes import empty_reply_words, prompt_note, reply_note, stored_note
from app.tui.widgets.chat.past_chats import PastChats
from app.tui.widgets.chat.pictures import AttachedPictures
from app.tui.widgets.chat.thought import fold_words
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

    from textual.message import Message

    from app.attachments import MediaShelf
    from app.conversation.recovery import Recovery
    from app.tui.services import Services


class ChatScreen(Screen):
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
        # chats to manage (app.tui.widgets.chat.manage): the list's highlighted chat, else the open one
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

    def __init__(self, services: Services) -> None:
        super().__init__(id="chat")
        self.services = services
        self.conversation: Conversation | None = None
        self.loading = False
        self.generating = False
        self._reply: MessageView | None = None
        self._reply_id = 0
        self._cancel = threading.Event()  # Esc pressed before the engine started this reply
        self.model_path = ""
        self.context_tokens = 0  # the tokens the open conversation takes in the context
        self._notes_shown: set[str] = set()  # a prompt's notes said once (a template stopped)
        self.deleted: list[tuple[int, bool]] = []  # chats deleted this run, latest last: (id, was it open)
        self.editing: int | None = None  # the message being edited in the message box (sent as a branch)
        # the sampling of the chat the next message starts (F4 with none open; --temp, --top-p ... at start)
        self.next_sampling = services.options.sampling

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
        shown = [v.text for v in self.query(MessageView) if v.role == "user"]
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
                self.generating = False
            self.services.report_worker_error(event.worker)

    def on_load_bar_failed(self) -> None:
        self.loading = False

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
            await run_slash(self, slash)
            return
        dropped = paths_in(text)
        if dropped:  # a terminal that types a dropped file's path rather than pasting it
            self.input.clear()
            self.attach(dropped)
            return
        if slash is not None:  # "/foo": asked about, not sent at once
            ask_before_sending(self, slash, text)
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
        app = self.services
        store = app.store
        if self.conversation is None:
            model = app.session.model
            assert model is not None, "a message is sent only with a model loaded"
            self.conversation = store.new_conversation(model.path, model.name, app.settings.system_prompt)
            chat_settings.started(self)
        attachments = tuple(self.pending)
        edited = branching.end_edit(self)
        if edited is not None and not attachments:  # an edit keeps the pictures of the message it replaces
            attachments = edited.attachments
        beside = edited.id if edited is not None else None
        msg = store.add_message(self.conversation.id, "user", text, attachments, beside)  # written before it is shown
        self.pictures.clear()
        self.messages.follow()  # what was sent, and its reply, in view whatever was read or marked before
        await self._remove_hint()
        if edited is not None:  # a branch from the edited message: what followed it is no longer on screen
            await self.redraw()
        else:
            view = MessageView("user", text, msg_id=msg.id, pictures=self.pictures.pictures(attachments))
            await self.messages.mount(view)
        self.refresh_chat_list()
        await self._start_reply()

    async def _start_reply(self, beside: int | None = None) -> None:
        """A reply to the conversation on screen (`beside`: a retry, kept beside that earlier reply)."""
        app = self.services
        assert self.conversation is not None
        store = app.store
        model = app.session.model
        assert model is not None, "a reply is asked for only with a model loaded"
        params = chat_settings.params_for(self)  # the chat's own sampling, else the user's, else the model's
        msg_id = store.begin_reply(self.conversation.id, beside, sampling_json(params))  # kept with the reply
        conv = store.conversation(self.conversation.id)
        turns = to_messages(conv.messages)  # the new reply, empty yet, is left out
        place = (conv.messages[-1].alternative, conv.messages[-1].alternatives)
        view = MessageView("assistant", "", author=model.name, note="…", msg_id=msg_id, place=place)
        self._reply, self._reply_id = view, msg_id
        self.messages.follow()
        self.generating = True
        self._cancel.clear()
        await self.messages.mount(view)
        self._generate(msg_id, turns, conv.system_prompt, params, self.pictures.shelf(conv.messages))

    def _post(self, message: Message) -> None:
        """post_message for callbacks that return nothing (whether it was queued does not matter)."""
        self.post_message(message)

    @work(thread=True, exclusive=True, group="generate", exit_on_error=False)
    def _generate(
        self,
        msg_id: int,
        turns: list[ChatMessage],
        system: str,
        params: GenerationParams,
        shelf: MediaShelf | None = None,
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
            thinking=chat_settings.thinking_of(self),
            on_progress=lambda progress: self._post(PromptRead(msg_id, progress)),
        )

    def on_context_resized(self, message: ContextResized) -> None:
        growth = message.growth
        model = self.services.session.model
        if model is None:
            return
        error = growth.error
        if error and not growth.after:
            self.app.notify(first_line(error), title="The context could not be resized", severity="warning")
        elif error:
            self.app.notify(
                f"The context could not grow beyond {growth.after:,} tokens: another program may "
                "have taken the memory. The oldest turns are left out of the prompt instead.\n"
                f"{first_line(error)}",
                title="Context kept",
                severity="warning",
                timeout=10,
            )
        self.sub_title = f"{model.name} · {model.n_ctx:,} of {model.max_ctx:,} tokens"
        self.update_context_line()

    def on_prompt_fitted(self, message: PromptFitted) -> None:
        self.context_tokens = message.tokens
        self.update_context_line()
        if message.note and message.note not in self._notes_shown:
            self._notes_shown.add(message.note)
            self.app.notify(message.note, title="Chat template stopped", severity="warning", timeout=12)
        if message.dropped:
            self.app.notify(
                f"The conversation is nearly as long as the context ({message.n_ctx:,} tokens): the "
                f"oldest {message.dropped} message{'s' if message.dropped != 1 else ''} "
                "were left out of the prompt; the system prompt is kept.",
                title="Context nearly full",
                severity="warning",
                timeout=8,
            )
        elif message.near_limit:
            self.app.notify(
                f"This conversation uses {message.tokens:,} of {message.n_ctx:,} tokens: the "
                "oldest turns will soon be left out of the prompt.",
                title="Context filling up",
                severity="warning",
                timeout=6,
            )

    async def on_reply_piece(self, message: ReplyPiece) -> None:
        if self._reply is not None and message.msg_id == self._reply_id:
            if self._reply.note != "…":  # the prompt is read: the reply's own note follows at its end
                self._reply.set_note("…")
            await self._reply.append(message.text)
            self._count_held_tokens()

    def on_prompt_read(self, message: PromptRead) -> None:
        """While the prompt is read, the reply's header says how far, as the engine tells it."""
        note = prompt_note(message.progress)
        if self._reply is not None and message.msg_id == self._reply_id and note is not None:
            self._reply.set_note(note)

    async def on_reply_finished(self, message: ReplyFinished) -> None:
        outcome = message.outcome
        view = self._reply if message.msg_id == self._reply_id else None
        self.generating = False
        self._reply = None
        if view is not None:
            if outcome.kind == REFUSED:  # never sent (the message could not be put to the model): no reply to keep
                await view.remove()
                if view.place[1] > 1:  # a retry refused: the reply before it is back
                    await self.redraw()
            elif not outcome.text:  # kept in the transcript, called what it is (the store keeps it too)
                stopped = "error" if outcome.error and not outcome.stats.stopped_by else outcome.stats.stopped_by
                await view.finish("", reply_note(outcome.stats, outcome.error), None, empty_reply_marker(stopped))
                if not outcome.error:
                    title, text = empty_reply_words(outcome.stats)
                    self.app.notify(text, title=title, severity="information" if title == "Stopped" else "warning")
            else:
                await view.finish(outcome.text, reply_note(outcome.stats, outcome.error), outcome.thought)
        if outcome.text:
            self._save_receipt(message.msg_id)
        self._count_held_tokens()
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
        if self.editing is not None and not self.generating:  # Esc drops an edit
            branching.cancel_edit(self)
            return
        if self.generating:
            self._cancel.set()
            self.services.session.stop()
        elif self.loading:
            self.services.session.stop()
            self.app.notify("Cancelling the load…", timeout=2)

    async def action_new_chat(self) -> None:
        if self.generating:
            self.app.notify("Stop the reply first (Esc).", severity="warning")
            return
        self.conversation = None
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
            for v in [v for v in self.query(MessageView) if v.msg_id == last.id]:
                await v.remove()
        if not any(m.role == "user" for m in conv.messages):
            return
        await self._start_reply(beside)

    def action_copy_reply(self) -> None:
        replies = [v for v in self.query(MessageView) if v.role == "assistant" and v.text]
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
        views = list(self.query(MessageView))
        if not views:
            self.app.notify("There is no message to select yet.", severity="warning")
            return
        branching.mark(self, views[-1])  # at once: the keys typed next are the list's, not the message box's

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
        chat_settings.open_dialog(self)

    def set_chat_setting(self, name: str, value: str) -> str:
        """One setting of this chat from typed words (`/temp 0.7`): app.tui.widgets.chat.chat_settings."""
        return chat_settings.set_chat_setting(self, name, value)

    def action_toggle_thinking(self) -> None:
        """The chat's thinking switch, for a model whose template has one (`enable_thinking`)."""
        model = self.services.session.model
        if model is None:
            self.app.notify("Load a model first (F2 opens the model list).", severity="warning")
            return
        switchable = can_switch(model.fmt)
        on = chat_settings.toggle_thinking(self) if switchable else True
        self.app.notify(toggled_words(model.name, switchable, on), title="Thinking", timeout=5)
        self._count_context()

    # -- past chats -----------------------------------------------------------------------------

    def refresh_chat_list(self) -> None:
        self.past_chats.show(self.conversation.id if self.conversation else None)

    def action_export_chat(self) -> None:
        records.export_chat(self)

    def _save_receipt(self, reply_id: int) -> None:
        records.save_receipt(self, reply_id)

    def action_receipt(self) -> None:
        records.show_receipt(self)

    @on(OptionList.OptionSelected, "#chat-list")
    async def _open_chat(self, event: OptionList.OptionSelected) -> None:
        if self.generating:
            self.app.notify("Stop the reply first (Esc).", severity="warning")
            return
        if event.option.id is None:
            return
        await self.open_conversation(int(event.option.id))

    async def open_conversation(self, conv_id: int) -> None:
        branching.end_edit(self)
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
        self.conversation = conv
        box = self.messages
        await box.remove_children()
        views = [
            MessageView(
                m.role,
                m.content,
                author=conv.model_name if m.role == "assistant" else "",
                note=stored_note(m),
                msg_id=m.id,
                pictures=self.pictures.pictures(m.attachments),
                thought=fold_words(m),
                place=(m.alternative, m.alternatives),
                empty=empty_reply_marker(m.stopped_by) if m.role == "assistant" and m.state != "streaming" else "",
            )
            for m in conv.messages
            if m.role != "system"
        ]
        if views:
            await box.mount_all(views)
        else:
            self._show_hint()
        self.context_tokens = 0
        self._count_context()
        return conv

    # -- branches: edit a message, step through alternatives (app.tui.widgets.chat.branching) -----------

    def action_focus_message(self, step: int) -> None:
        branching.focus_step(self, step)

    async def action_alternative(self, step: int) -> None:
        await branching.step_alternative(self, step)

    def action_edit_message(self) -> None:
        manage.skip_while_typing(self)
        branching.begin_edit(self)

    def action_leave_messages(self) -> None:
        branching.leave_messages(self)

    async def action_delete_chat(self) -> None:
        await manage.delete_chat(self)

    async def action_undo_delete(self) -> None:
        manage.skip_while_typing(self, unless=bool(self.deleted))
        await manage.undo_delete(self)

    def action_rename_chat(self) -> None:
        manage.skip_while_typing(self)
        manage.rename_chat(self)

    @work(thread=True, exclusive=True, group="count", exit_on_error=False)
    def _count_context(self) -> None:
        """The open conversation's tokens in the loaded model's format (the engine tokenizes)."""
        session = self.services.session
        model, conversation = session.model, self.conversation
        if model is None or conversation is None or self.generating or self.loading:
            return
        stored = self.services.store.conversation(conversation.id)
        shelf = self.pictures.shelf(stored.messages)
        engine = session.engine

        def tokenize_media(text: str, ids: tuple[str, ...]) -> list[int]:
            assert shelf is not None
            return engine.tokenize_media(MediaPrompt(text, tuple(shelf(i) for i in ids)))

        try:
            count = conversation_tokens(
                model.fmt,
                stored.system_prompt,
                to_messages(stored.messages),
                engine.tokenize,
                model.eos,
                model.marker if shelf is not None else "",
                tokenize_media,
                template_switches(model.fmt.template, chat_settings.thinking_of(self)),
            )
        except Exception:  # the engine is gone, say: the next reply says so
            return
        self.app.call_from_thread(self._counted, conversation.id, count)

    def _counted(self, conversation_id: int, count: int) -> None:
        if self.conversation is not None and self.conversation.id == conversation_id:
            self.context_tokens = count
            self.update_context_line()

    # -- status ---------------------------------------------------------------------------------

    def _show_hint(self) -> None:
        """The hint in an empty chat; an earlier hint ("No model loaded yet") is brought up to date."""
        box = self.messages
        hints = list(box.query("#hint").results(Static))
        if box.children and not hints:
            return
        model = self.services.session.model
        if model is None:
            text = "No model loaded yet." if not self.loading else "Loading the model…"
        elif model.fmt.kind == "transcript":
            text = (
                f"{model.name} is a base model without a chat template, so vramchat talks to it as a plain "
                "Q/A transcript. Short factual questions work best, for example: What is the capital of France?"
            )
        else:
            text = f"Ask {model.name} anything. ({model.fmt.description})"
        if hints:
            hints[0].update(text)
        else:
            box.mount(Static(text, id="hint", classes="hint", markup=False))

    async def _remove_hint(self) -> None:
        for hint in self.query("#hint"):
            await hint.remove()

    def _count_held_tokens(self) -> None:
        """During a chat the context count is the tokens llama.cpp holds: the prompt and the reply so far
        (what reopening the chat counts again); a stopped engine's nothing leaves the count as it was."""
        held = self.services.session.engine.kv_cells_used()
        if held > 0 and held != self.context_tokens:
            self.context_tokens = held
            self.update_context_line()

    def update_context_line(self) -> None:
        system = self.conversation.system_prompt if self.conversation else None
        loaded = self.services.session_started and self.services.session.model is not None
        sampling = chat_settings.status_words(self) if loaded else None
        self.context_line.show_context(self.context_tokens, system, self.loading, sampling)
        self.query_one("#settings-line", SettingsLine).show_settings(
            chat_settings.system_prompt_of(self), chat_settings.sampling_of(self)
        )

"""What the chat's helpers (branching, manage, chat_settings, the palette's commands) use of the chat
screen, as a Protocol: they take the screen without importing it (the screen imports them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.app import App
    from textual.widget import Widget

    from app.conversation.sampling import ChatSampling
    from app.store import Conversation
    from app.tui.services import Services
    from app.tui.widgets.chat.past_chats import PastChats
    from app.tui.widgets.chat_input import ChatInput


class ChatView(Protocol):
    services: Services
    conversation: Conversation | None
    generating: bool
    editing: int | None  # the message being edited in the message box
    deleted: list[tuple[int, bool]]  # chats deleted this run: (id, was it open)
    next_sampling: ChatSampling  # the settings of the chat the next message starts

    @property
    def app(self) -> App[Any]: ...
    @property
    def focused(self) -> Widget | None: ...
    @property
    def input(self) -> ChatInput: ...
    @property
    def past_chats(self) -> PastChats: ...

    def query(self, selector: Any) -> Any: ...
    def set_focus(self, widget: Widget | None, scroll_visible: bool = True) -> None: ...
    def action_stop(self) -> None: ...
    async def action_new_chat(self) -> None: ...
    async def open_conversation(self, conv_id: int) -> None: ...
    async def redraw(self, conv_id: int | None = None) -> Conversation: ...
    def refresh_chat_list(self) -> None: ...
    def update_context_line(self) -> None: ...

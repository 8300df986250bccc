"""What a widget (or a helper of a screen) asks the screen it is on to open: the dialogs are screens
(app/tui/screens/), and a widget never imports one. The widget posts one of these messages; the screen,
a DialogHost (app/tui/screens/dialog_host.py), opens the dialog and hands the answer to `answered`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from app.conversation.sampling import ChatSampling


@dataclass(frozen=True)
class ChatSettings:
    """A chat's own settings as its dialog shows them."""

    system_prompt: str
    sampling: ChatSampling  # the chat's own; unset values are the model's (app.conversation.sampling)


@dataclass
class ConfirmAsked(Message):
    """A yes/no question: `answered` gets True for `confirm`, False (or None) for Cancel."""

    title: str
    text: str
    answered: Callable[[bool | None], None]
    confirm: str = "OK"
    danger: bool = False
    focus_confirm: bool = False


@dataclass
class RenameAsked(Message):
    """A chat's new name, from its `current` one: `answered` gets it, or None where it is left as it was."""

    current: str
    answered: Callable[[str | None], None]


@dataclass
class ChatSettingsAsked(Message):
    """The chat settings dialog over `current`, for `scope` ("this chat", "the next chat"); `model_own`: the
    model's own values, in words. `answered` gets the settings kept, or None."""

    current: ChatSettings
    scope: str
    model_own: str
    answered: Callable[[ChatSettings | None], None]


@dataclass
class ReceiptAsked(Message):
    """A chat's plan receipts, and what each reply on screen was sampled with (`samplings`, in order)."""

    title: str
    receipts: list[dict[str, Any]]
    samplings: list[dict[str, Any]] = field(default_factory=list)

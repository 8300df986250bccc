"""What the chat does with a message that starts with "/": runs the command it names, or asks whether
to send it to the model as it is (a command mistyped is not a message)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from textual.app import App

from app.tui.screens.dialogs import ConfirmDialog
from app.tui.screens.help import HelpScreen
from app.tui.widgets.chat.chat_setting import SettingsHolder, chat_setting, set_chat_setting
from app.tui.widgets.chat.slash_commands import Slash, help_markdown

OFF_WORDS = ("off", "none", "clear")  # /system off
DEFAULT_WORDS = ("default", "auto", "off", "none")  # /temp default: the model's own

SLASH_HELP = f"""\
# Slash commands

Type `/` in the message box: the commands that match are listed above it. `↑` `↓` choose,
`Tab` completes, `Enter` runs the one chosen, `Esc` closes the list. A message that starts with
`/` and names no command is not sent at once: vramchat asks first.

{help_markdown()}

Press `Esc` to close this help.
"""


class SlashChat(SettingsHolder, Protocol):
    """The chat screen, as far as its slash commands go."""

    @property
    def app(self) -> App[Any]: ...

    def run_action(self, action: str) -> Awaitable[None]: ...

    def image_command(self, rest: str) -> None: ...

    def send_message(self, text: str) -> None: ...


async def run_slash(chat: SlashChat, slash: Slash) -> None:
    """Run the command `slash` names (it names one)."""
    command = slash.command
    assert command is not None, "only a known command is run"
    if command.action:
        await chat.run_action(command.action)
    elif command.name == "help":
        chat.app.push_screen(HelpScreen(SLASH_HELP))
    elif command.name == "image":
        chat.image_command(slash.rest)
    elif command.name == "system":
        _system_prompt(chat, slash.rest)
    elif command.name == "temp":
        _temperature(chat, slash.rest)


def ask_before_sending(chat: SlashChat, slash: Slash, text: str) -> None:
    """ "/foo" names no command: send it to the model only when the user says so (Esc: back to the box)."""

    def answered(send: bool | None) -> None:
        if send:
            chat.send_message(text)

    word = f"/{slash.word}" if slash.word else "/"
    chat.app.push_screen(
        ConfirmDialog(
            f"{word} is not a command",
            "Send it to the model as it is? Enter sends, Esc edits it. (/help lists the commands.)",
            confirm="Send",
            focus_confirm=True,
        ),
        answered,
    )


def _system_prompt(chat: SlashChat, rest: str) -> None:
    if not rest:
        current = str(chat_setting(chat, "system_prompt") or "")
        chat.app.notify(
            f"System prompt: {current}" if current else "No system prompt. /system TEXT sets one.",
            timeout=6,
        )
        return
    if rest.lower() in OFF_WORDS:
        scope = set_chat_setting(chat, "system_prompt", "")
        chat.app.notify("System prompt removed.", title=scope, timeout=3)
        return
    scope = set_chat_setting(chat, "system_prompt", rest)
    chat.app.notify(f"System prompt: {rest}", title=scope, timeout=4)


def _temperature(chat: SlashChat, rest: str) -> None:
    if not rest:
        current = chat_setting(chat, "temperature")
        said = "the model's own (greedy for a base model)" if current is None else f"{current:g}"
        chat.app.notify(f"Temperature: {said}. /temp 0.7 sets it.", timeout=5)
        return
    if rest.lower() in DEFAULT_WORDS:
        scope = set_chat_setting(chat, "temperature", None)
        chat.app.notify("Temperature: the model's own.", title=scope, timeout=3)
        return
    try:
        value = float(rest)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 2:
        chat.app.notify(
            f"“{rest}” is not a temperature: give a number from 0 (greedy) to 2, such as /temp 0.7, "
            "or /temp default for the model's own.",
            severity="warning",
        )
        return
    scope = set_chat_setting(chat, "temperature", value)
    chat.app.notify(f"Temperature: {value:g}.", title=scope, timeout=3)

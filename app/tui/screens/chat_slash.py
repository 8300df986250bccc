"""What the chat does with a message that starts with "/": runs the command it names, or asks whether
to send it to the model as it is (a command mistyped is not a message)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from app.tui.screens.dialogs import ConfirmDialog
from app.tui.screens.help import HelpScreen
from app.tui.widgets.chat.slash_commands import Slash, help_markdown

if TYPE_CHECKING:
    from app.tui.screens.chat_controller import ChatController

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


async def run_slash(
    chat: ChatController, slash: Slash, run_action: Callable[[str], Awaitable[None]], attach: Callable[[str], None]
) -> None:
    """Run the command `slash` names (it names one): a key's action by `run_action` (the chat screen's), /image
    by `attach`, /system and /temp on the chat's settings."""
    command = slash.command
    assert command is not None, "only a known command is run"
    if command.action:
        await run_action(command.action)
    elif command.name == "help":
        chat.screen.app.push_screen(HelpScreen(SLASH_HELP))
    elif command.name == "image":
        attach(slash.rest)
    elif command.name == "system":
        _system_prompt(chat, slash.rest)
    elif command.name == "temp":
        _temperature(chat, slash.rest)


def ask_before_sending(chat: ChatController, slash: Slash, text: str, send: Callable[[str], None]) -> None:
    """ "/foo" names no command: `send` it to the model only when the user says so (Esc: back to the box)."""

    def answered(yes: bool | None) -> None:
        if yes:
            send(text)

    word = f"/{slash.word}" if slash.word else "/"
    chat.screen.app.push_screen(
        ConfirmDialog(
            f"{word} is not a command",
            "Send it to the model as it is? Enter sends, Esc edits it. (/help lists the commands.)",
            confirm="Send",
            focus_confirm=True,
        ),
        answered,
    )


def _system_prompt(chat: ChatController, rest: str) -> None:
    app = chat.screen.app
    if not rest:
        current = chat.system_prompt
        app.notify(
            f"System prompt: {current}" if current else "No system prompt. /system TEXT sets one.",
            timeout=6,
        )
        return
    if rest.lower() in OFF_WORDS:
        scope = chat.set_system_prompt("")
        app.notify("System prompt removed.", title=scope, timeout=3)
        return
    scope = chat.set_system_prompt(rest)
    app.notify(f"System prompt: {rest}", title=scope, timeout=4)


def _temperature(chat: ChatController, rest: str) -> None:
    app = chat.screen.app
    if not rest:
        current = chat.sampling.temperature
        said = "the model's own (greedy for a base model)" if current is None else f"{current:g}"
        app.notify(f"Temperature: {said}. /temp 0.7 sets it.", timeout=5)
        return
    if rest.lower() in DEFAULT_WORDS:
        scope = chat.set_temperature(None)
        app.notify("Temperature: the model's own.", title=scope, timeout=3)
        return
    try:
        value = float(rest)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 2:
        app.notify(
            f"“{rest}” is not a temperature: give a number from 0 (greedy) to 2, such as /temp 0.7, "
            "or /temp default for the model's own.",
            severity="warning",
        )
        return
    scope = chat.set_temperature(value)
    app.notify(f"Temperature: {value:g}.", title=scope, timeout=3)

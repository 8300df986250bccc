"""The chat's slash commands: what can be typed after "/" in the message box, and what each does.

Most are the chat's keys by another name (the action each runs on the chat screen); /image,
/system and /temp take what follows them. Anything else that starts with "/" is not sent at once:
the chat asks first (a typo of a command is not a message for the model).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlashCommand:
    name: str  # without the slash
    description: str  # one line, for the completion list and /help
    action: str = ""  # the chat screen's action it runs; empty: handled by name (it takes an argument)
    argument: str = ""  # what may follow it, for /help ("TEXT"); empty: nothing
    key: str = ""  # the key that does the same, for /help


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("help", "list these commands"),
    SlashCommand(
        "system", "this chat's system prompt: /system TEXT sets it, /system off removes it", argument="[TEXT]"
    ),
    SlashCommand("temp", "this chat's temperature: /temp 0.7, /temp default (the model's own)", argument="[VALUE]"),
    SlashCommand("image", "attach a picture: /image PATH, /image clear; alone: the file dialog", argument="[PATH]"),
    SlashCommand("model", "choose another model (the model list)", "app.show_picker", key="F2"),
    SlashCommand("clear", "start a new chat (this one stays in the list)", "new_chat", key="Ctrl+N"),
    SlashCommand("new", "start a new chat", "new_chat", key="Ctrl+N"),
    SlashCommand("retry", "ask for the last reply again", "retry", key="Ctrl+R"),
    SlashCommand("copy", "copy the last reply", "copy_reply", key="Ctrl+O"),
    SlashCommand("select", "select a message or code block to copy", "select_messages", key="Ctrl+↑"),
    SlashCommand("settings", "chat settings: system prompt, temperature, max tokens", "chat_settings", key="F4"),
    SlashCommand("export", "save this chat as Markdown and JSON", "export_chat", key="Ctrl+S"),
    SlashCommand("receipt", "this chat's plan receipt", "receipt", key="F8"),
    SlashCommand("reload", "reload the model", "reload_model", key="F5"),
    SlashCommand(
        "serve", "serve the model to other tools (OpenAI API on 127.0.0.1); again to stop", "app.toggle_serving"
    ),
    SlashCommand("chats", "show or hide the list of chats", "toggle_chats", key="Ctrl+B"),
    SlashCommand("graphs", "show or hide the memory graphs", "toggle_dashboard", key="Ctrl+G"),
    SlashCommand("quit", "quit vramchat", "app.quit", key="Ctrl+Q"),
)

BY_NAME = {c.name: c for c in COMMANDS}


@dataclass(frozen=True)
class Slash:
    """A message that starts with "/": the command it names (None: no such command) and the rest."""

    word: str  # as typed, without the slash
    command: SlashCommand | None
    rest: str


def parse(text: str) -> Slash | None:
    """The slash command `text` holds; None when it does not start with "/"."""
    text = text.strip()
    if not text.startswith("/"):
        return None
    word, _, rest = text[1:].partition(" ")
    if "\n" in word:  # "/word\nmore": the word ends at the line's end
        word, _, more = word.partition("\n")
        rest = f"{more} {rest}".strip()
    return Slash(word, BY_NAME.get(word.lower()), rest.strip())


def completions(text: str) -> list[SlashCommand]:
    """The commands a box holding `text` may be completed to: while only "/" and a word are typed."""
    if not text.startswith("/") or any(c.isspace() for c in text):
        return []
    typed = text[1:].lower()
    return [c for c in COMMANDS if c.name.startswith(typed)]


def help_markdown() -> str:
    """The commands as a Markdown table, for /help and F1."""
    rows = [
        f"| `/{c.name}{' ' + c.argument if c.argument else ''}` | {c.description}{f' (`{c.key}`)' if c.key else ''} |"
        for c in COMMANDS
    ]
    return "\n".join(["| command | does |", "|---|---|", *rows])

"""The message box: multi-line; Enter sends, Ctrl+J (or Shift+Enter) starts a new line; Up on the first
row and Down on the last go through earlier messages; a pasted file path (what a terminal pastes when a
file is dropped on it) attaches the file instead of becoming text.

The hint names Ctrl+J: Shift+Enter reaches the app only where the terminal reports it apart from
Enter (the kitty keyboard protocol), not inside tmux or screen, and Textual cannot tell which."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widget import Widget
from textual.widgets import TextArea

from app.tui.widgets.chat.input_recall import InputRecall
from app.tui.widgets.chat.slash_menu import SlashMenu

PLACEHOLDERS = (  # the message box's hint, longest first
    "Ask something… (Enter sends, Ctrl+J new line, ↑ earlier messages, / commands, Ctrl+T a picture)",
    "Ask something… (Enter sends, Ctrl+J new line, ↑ earlier messages, / commands)",
    "Ask something… (Enter sends, Ctrl+J new line, / commands)",
    "Ask something… (Enter sends, Ctrl+J new line)",
    "Ask something…",
)
EDITING_TITLES = (  # the box's title while an earlier message is edited in it, longest first: one that fits
    "Editing: Enter sends it as a new branch, Esc drops the edit",
    "Editing: Enter sends a new branch, Esc drops it",
    "Editing: Esc drops the edit",
    "Editing",
)
TITLE_FRAME = 6  # the border's corners and the rule and space each side of its title


class ChatInput(TextArea):
    @dataclass
    class Submitted(Message):
        text: str

    @dataclass
    class FilesPasted(Message):
        """The paste was nothing but the paths of files that exist (a file dropped on the terminal)."""

        paths: list[str]

    DEFAULT_CSS = """
    ChatInput { height: auto; max-height: 10; min-height: 3; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.placeholder = PLACEHOLDERS[0]
        self._sent: list[str] = []  # sent from this box, newest first: the recall until the screen gives more
        self.recall = InputRecall(lambda: self._sent)
        self._placed = (0, 0)  # where the last recalled message left the cursor
        self.menu = SlashMenu()  # the slash commands that match, above the box while "/word" is typed
        self.sees = True  # whether the loaded model can be sent pictures (the hint offers Ctrl+T then)
        self.editing = False  # an earlier message is being edited here (the title says so until it is sent)

    def on_mount(self) -> None:
        if isinstance(self.parent, Widget):
            self.parent.mount(self.menu, before=self)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if event.text_area is self:
            self.menu.show_for(self.text)

    def on_resize(self, event: events.Resize) -> None:
        self._fit_placeholder()
        self._fit_title()

    def show_editing(self, editing: bool) -> None:
        """Say in the box's title that an earlier message is being edited (until it is sent or dropped)."""
        self.editing = editing
        self._fit_title()

    def _fit_title(self) -> None:
        """The longest editing title that fits the border whole (a cut one reads as broken)."""
        room = self.outer_size.width - TITLE_FRAME
        fits = next((t for t in EDITING_TITLES if len(t) <= room), EDITING_TITLES[-1])
        self.border_title = fits if self.editing else None

    def offer_pictures(self, sees: bool) -> None:
        """Offer pictures (Ctrl+T) in the hint only while the loaded model can see them."""
        self.sees = sees
        self._fit_placeholder()

    def _fit_placeholder(self) -> None:
        """The longest hint that fits the box on one row (a cut hint reads as broken)."""
        room = self.content_size.width - 1
        hints = [p for p in PLACEHOLDERS if self.sees or "picture" not in p]
        self.placeholder = next((p for p in hints if len(p) <= room), PLACEHOLDERS[-1])

    async def _on_paste(self, event: events.Paste) -> None:
        """Paths of files attach them; anything else is pasted as text (TextArea's own handler runs next)."""
        from app.attachments import paths_in

        paths = paths_in(event.text)
        if paths:
            event.stop()
            event.prevent_default()
            self.post_message(self.FilesPasted(paths))

    async def _on_key(self, event: events.Key) -> None:
        if self.menu.shown and self._steer_menu(event.key):
            event.stop()
            event.prevent_default()
            return
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            text = self.text
            if text.strip():
                self.recall.stop()
                self._sent.insert(0, text)
                self.post_message(self.Submitted(text))
            return
        if event.key in ("up", "down") and self._recalled(older=event.key == "up"):
            event.stop()
            event.prevent_default()
            return
        if event.key in ("shift+enter", "ctrl+j", "newline"):
            event.stop()
            event.prevent_default()
            start, end = self.selection
            self.replace("\n", start, end, maintain_selection_offset=False)
            return
        await super()._on_key(event)

    def _recalled(self, older: bool) -> bool:
        """Up on the first row shows the message before; Down on the last row the one after, then the
        draft. Elsewhere (or with text selected) the arrows move the cursor as usual."""
        start, end = self.selection
        if start != end:
            return False
        navigator = self.navigator
        untouched = self.recall.walking and end == self._placed  # the cursor where the last recall left it
        if older and (untouched or navigator.is_first_wrapped_line(end)):
            text = self.recall.older(self.text)
        elif not older and self.recall.walking and (untouched or navigator.is_last_wrapped_line(end)):
            text = self.recall.newer(self.text)
        else:
            return False
        if text is None:
            return False
        self.load_text(text)
        # at the top of a message of several lines going back, else at its end: ready to edit, and the
        # next Up (or Down) goes on through the messages until the cursor is moved
        self.move_cursor((0, 0) if older and "\n" in text else self.document.end)
        self._placed = self.cursor_location
        return True

    def _steer_menu(self, key: str) -> bool:
        """While the command list is shown: Up and Down choose, Tab completes, Enter runs the chosen
        command, Esc closes the list. Other keys type as usual."""
        if key in ("up", "down"):
            self.menu.move(-1 if key == "up" else 1)
            return True
        if key == "escape":
            self.menu.dismiss(self.text)
            return True
        command = self.menu.chosen()
        if key not in ("tab", "enter") or command is None:
            return False
        text = f"/{command.name}"
        if key == "enter":
            self.menu.hide()
            self.recall.stop()
            self._sent.insert(0, text)
            self.post_message(self.Submitted(text))
            return True
        self.load_text(f"{text} " if command.argument else text)
        self.move_cursor(self.document.end)
        return True

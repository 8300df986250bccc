"""Up and Down in the message box go through earlier messages, as a shell's history does.

The messages come newest first from a source the chat screen gives (this chat's, then earlier
chats'), read only as far as the user goes back. The text typed before the first Up is kept
and comes back after the newest message; editing a recalled message starts over from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from app.store import Store, StoreError


class InputRecall:
    def __init__(self, source: Callable[[], Iterable[str]]) -> None:
        """`source`: earlier messages, newest first (asked again at each new walk back)."""
        self.source = source
        self._walk: Iterator[str] | None = None
        self._seen: list[str] = []  # the messages reached so far on this walk, newest first
        self._at = -1  # the index in _seen shown now; -1: the draft
        self._draft = ""
        self._shown = ""  # what this put in the box last: anything else there means it was edited

    @property
    def walking(self) -> bool:
        return self._walk is not None

    def older(self, text: str) -> str | None:
        """The message before the one shown (`text` is the box's text now); None: no earlier one."""
        if self._walk is None or text != self._shown:
            self._start(text)
        if self._at + 1 >= len(self._seen) and not self._read_one():
            return None
        self._at += 1
        self._shown = self._seen[self._at]
        return self._shown

    def newer(self, text: str) -> str | None:
        """The message after the one shown, then the draft; None when not walking (or edited)."""
        if self._walk is None or text != self._shown:
            self.stop()
            return None
        self._at -= 1
        if self._at < 0:
            draft = self._draft
            self.stop()
            return draft
        self._shown = self._seen[self._at]
        return self._shown

    def stop(self) -> None:
        """The walk ends (a message was sent, or the user went back to the draft)."""
        self._walk, self._seen, self._at, self._draft, self._shown = None, [], -1, "", ""

    def _start(self, draft: str) -> None:
        self._walk = iter(self.source())
        self._seen, self._at, self._draft = [], -1, draft

    def _read_one(self) -> bool:
        """The next earlier message not met yet on this walk (repeats are shown once)."""
        assert self._walk is not None
        for text in self._walk:
            if text.strip() and text not in self._seen and text != self._draft:
                self._seen.append(text)
                return True
        return False


def earlier_messages(on_screen: list[str], store: Store, current: int | None, chats: int = 100) -> Iterator[str]:
    """The user's messages newest first: those of the chat on screen (`on_screen`, oldest first, the
    branch shown), then those of the other chats, the most recently used first (each read when reached)."""
    yield from reversed(on_screen)
    for summary in store.conversations(limit=chats):
        if summary.id == current:
            continue
        try:
            messages = store.conversation(summary.id).messages
        except StoreError:  # deleted meanwhile
            continue
        yield from (m.content for m in reversed(messages) if m.role == "user")

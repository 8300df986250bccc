"""The pictures (and sounds) attached to the next message: checked and kept in the media store (in a
worker: hashing a large file takes a moment), listed in one line above the input, and handed over,
with what the loaded model will be shown of them, when the message is sent."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.message import Message
from textual.widgets import Static

from app.attachments import Attachment

if TYPE_CHECKING:
    from app.attachments import MediaShelf
    from app.session import LoadedModel
    from app.store import StoredMessage
    from app.tui.services import Services

Picture = tuple[Attachment, Path | None, str]  # the attachment, its file in the store, how it is scaled


class AttachedPictures(Static):
    """The line listing the pictures attached to the next message (hidden while there are none)."""

    class Kept(Message):
        """Files were checked and the line shows the outcome: the input takes the focus back."""

    def __init__(self, services: Services, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.services = services
        self.pending: list[Attachment] = []

    def on_mount(self) -> None:
        self.display = False

    def _model(self) -> LoadedModel | None:
        return self.services.session.model if self.services.session_started else None

    def command(self, rest: str) -> bool:
        """`/image PATH [PATH...]` attaches, `/image clear` drops them; False for `/image` alone (the
        screen opens the file dialog)."""
        import shlex

        if not rest:
            return False
        if rest == "clear":
            self.clear()
            return True
        try:
            paths = shlex.split(rest)
        except ValueError:
            paths = [rest]
        self.attach(paths)
        return True

    def attach(self, paths: list[str]) -> None:
        """Check and keep the files (hashing a large one takes a moment: in a worker), then list them."""
        model = self._model()
        if model is not None and not model.sees:
            self.app.notify(
                cannot_see(model.name, model.path), title="This model cannot see", severity="error", timeout=10
            )
            return
        self._keep(paths)

    @work(thread=True, group="attach", exit_on_error=False)
    def _keep(self, paths: list[str]) -> None:
        from app.attachments import MediaError, MediaStore

        kept, errors = [], []
        for path in paths:
            try:
                kept.append(MediaStore().put(path))
            except MediaError as exc:
                errors.append(str(exc))
        self.app.call_from_thread(self._kept, kept, errors)

    def _kept(self, kept: list[Attachment], errors: list[str]) -> None:
        for error in errors:
            self.app.notify(error, title="Not attached", severity="error", timeout=10)
        model = self._model()
        for a in kept:
            if a.kind == "audio" and model is not None and not model.hears:
                self.app.notify(
                    f"{a.name} is a sound, and {model.name}'s projector has no audio encoder.",
                    title="Not attached",
                    severity="error",
                )
                continue
            if all(p.id != a.id for p in self.pending):
                self.pending.append(a)
            note = self.scaled_note(a)
            if note:
                self.app.notify(f"{a.name}: {note}.", title="Picture attached", timeout=6)
        self._show()
        self.post_message(self.Kept())

    def scaled_note(self, a: Attachment) -> str:
        """What the model will be shown of a picture, when it is scaled down for the plan."""
        from app.attachments import pixel_limit, scaled_size

        model = self._model()
        if model is None or not model.sees or a.kind != "image":
            return ""
        w, h = scaled_size(a.width, a.height, pixel_limit(model.projector))
        return f"scaled to {w}×{h} for the model" if (w, h) != (a.width, a.height) else ""

    def clear(self) -> None:
        self.pending.clear()
        self._show()

    def take(self) -> tuple[Attachment, ...]:
        """The attachments for the message being sent; the line empties."""
        attachments = tuple(self.pending)
        self.clear()
        return attachments

    def _show(self) -> None:
        self.display = bool(self.pending)
        text = Text("Attached: ", style="bold")
        for i, a in enumerate(self.pending):
            text.append(("  ·  " if i else "") + ("" if a.kind == "image" else "♪ ") + a.describe())
        text.append("   (sent with your next message; /image clear removes them)", style="dim")
        self.update(text)

    def pictures(self, attachments: tuple[Attachment, ...]) -> tuple[Picture, ...]:
        """A message's attachments as its view shows them."""
        from app.attachments import MediaStore

        store = MediaStore()
        return tuple((a, store.path_of(a) if store.has(a) else None, self.scaled_note(a)) for a in attachments)

    def shelf(self, messages: list[StoredMessage]) -> MediaShelf | None:
        """The conversation's pictures, as the loaded model is shown them (None: it cannot see)."""
        from app.attachments import MediaShelf, MediaStore, pixel_limit

        model = self.services.session.model
        if model is None or not model.sees:
            return None
        shelf = MediaShelf(pixel_limit(model.projector), MediaStore())
        for m in messages:
            for a in m.attachments:
                shelf.add(a)
        return shelf


def cannot_see(name: str, path: str) -> str:
    """Why a picture cannot be sent: the model has no projector at all, or was loaded without the one beside it."""
    from app.vision import projectors_beside

    if not projectors_beside(path):
        return (
            f"{name} cannot see pictures: it has no vision projector (mmproj). Send the words alone, or load a "
            "model that can see (one with a projector beside it)."
        )
    return (
        f"{name} was loaded without its vision projector, so it cannot see pictures. Load it with Vision on "
        "(F2, the model's settings), or send the words alone."
    )

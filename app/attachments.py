"""Images (and sounds) attached to a message: checked, kept once by content, and made ready for the model.

- `attach(path)` checks a file a user names (it exists, can be read, is not huge, is an image
  Pillow can open or a sound libmtmd can decode) and copies it into vramchat's data folder under
  its SHA-256 (`MediaStore`): the same picture attached twice is kept once, and a chat keeps its
  pictures even when the originals move or go.
- `prepare(attachment, limit)` gives the engine the pixels: upright (EXIF), RGB, and scaled down
  to the most pixels the projector takes under the plan (`pixel_limit`), so that no image costs
  more than the plan allowed for; it says when it scaled. `MediaShelf` decodes a picture once: on
  later turns it gives its kind and size alone, which the engine process knows it by.
- `paths_in(text)` finds the files in what a terminal pastes when a file is dropped on it or a
  path is pasted: quoted, backslash-escaped, or `file://` URLs.

Errors are `MediaError`, one line a user can act on.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import VramchatError
from app.paths import data_dir

if TYPE_CHECKING:  # the chat store imports this module: it stays light (no engine, no Pillow) until used
    from app.engine.types import Media
    from planner.projector import Projector

MAX_FILE_BYTES = 64 * 1024 * 1024  # a larger file is refused: no camera writes a photo this big
MAX_OPEN_PIXELS = 100_000_000  # an image with more pixels is refused before it is decoded
DEFAULT_PIXEL_LIMIT = 4096 * 4096  # what an image is scaled to for a projector whose largest image is not known
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff")
AUDIO_SUFFIXES = (".wav", ".mp3", ".flac")


class MediaError(VramchatError, ValueError):
    """A file that cannot be attached, or cannot be shown to the model; the message says why."""

    title = "The file cannot be attached"


@dataclass(frozen=True)
class Attachment:
    """An image or sound kept with a message: by content (SHA-256), with the name it was attached by."""

    id: str  # SHA-256 of the file, hex
    name: str  # the file's name when it was attached
    kind: str  # "image" or "audio"
    size: int  # bytes
    width: int = 0
    height: int = 0
    suffix: str = ""  # the stored file's extension

    def describe(self) -> str:
        """ "photo.jpg · 4032×3024 · 2.1 MB" (what a terminal that cannot draw the picture shows)."""
        parts = [self.name]
        if self.width and self.height:
            parts.append(f"{self.width}×{self.height}")
        parts.append(_size_words(self.size))
        return " · ".join(parts)


@dataclass(frozen=True)
class Scaled:
    """An image made smaller for the model: from its own size to the one sent."""

    name: str
    before: tuple[int, int]
    after: tuple[int, int]

    def describe(self) -> str:
        (w, h), (w2, h2) = self.before, self.after
        return (
            f"{self.name} ({w}×{h}) is scaled to {w2}×{h2} for the model: the largest image its projector "
            "takes under this plan (--image-max-tokens sets it)"
        )


def _size_words(n: int) -> str:
    for unit, step in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= step:
            return f"{n / step:.1f} {unit}"
    return f"{n} B"


def media_dir() -> Path:
    return data_dir() / "media"


def pixel_limit(projector: Projector | None) -> int:
    """The most pixels an image keeps for this projector under the plan (its largest image's area)."""
    if projector is None:
        return DEFAULT_PIXEL_LIMIT
    from planner.projectors.compute import largest_image_pixels

    return largest_image_pixels(projector, projector.image_max_tokens) or DEFAULT_PIXEL_LIMIT


# -- checking a file ------------------------------------------------------------------------------


def _audio_kind(head: bytes) -> bool:
    """WAV, MP3 or FLAC by their first bytes (what libmtmd's decoder reads)."""
    return (
        (head[:4] == b"RIFF" and head[8:12] == b"WAVE")
        or head[:4] == b"fLaC"
        or head[:3] == b"ID3"
        or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0)
    )


def inspect(path: str | os.PathLike[str]) -> Attachment:
    """What the file at `path` is, or MediaError saying why it cannot be attached."""
    p = Path(os.path.expanduser(os.fspath(path)))
    name = p.name or str(p)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise MediaError(f"{p}: no such file") from None
    except OSError as exc:
        raise MediaError(f"{p}: {exc.strerror or exc}") from None
    if p.is_dir():
        raise MediaError(f"{p}: is a folder, not a picture")
    if st.st_size == 0:
        raise MediaError(f"{name}: the file is empty")
    if st.st_size > MAX_FILE_BYTES:
        raise MediaError(
            f"{name}: the file is too large ({_size_words(st.st_size)}; the most vramchat attaches is "
            f"{_size_words(MAX_FILE_BYTES)})"
        )
    try:
        with p.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise MediaError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    digest = _sha256(p)
    if _audio_kind(head):
        return Attachment(digest, name, "audio", st.st_size, suffix=p.suffix.lower() or ".audio")
    if p.suffix.lower() in AUDIO_SUFFIXES:
        raise MediaError(f"{name}: not a sound vramchat can read (WAV, MP3 or FLAC)")
    width, height, fmt = _image_header(p, name)
    suffix = "." + fmt.lower().replace("jpeg", "jpg") if fmt else p.suffix.lower()
    return Attachment(digest, name, "image", st.st_size, width, height, suffix)


def _image_header(p: Path, name: str) -> tuple[int, int, str]:
    """(width, height, format) from the header alone; MediaError when it is no image or an absurd one."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():  # our own limit is said below, in words
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(p) as im:
                width, height, fmt = im.width, im.height, im.format or ""
                if width * height <= MAX_OPEN_PIXELS:
                    im.verify()  # a cut or damaged file is named now, not when the model is shown it
    except UnidentifiedImageError:
        raise MediaError(
            f"{name}: not an image vramchat can read (it reads PNG, JPEG, GIF, BMP, WebP and TIFF; "
            "sounds: WAV, MP3, FLAC)"
        ) from None
    except Image.DecompressionBombError as exc:  # Pillow refuses it from the header (far beyond our own limit)
        import re

        count = re.search(r"\((\d+) pixels\)", str(exc))
        size = f" ({int(count[1]) / 1e6:,.0f} million pixels" if count else " ("
        raise MediaError(
            f"{name}: the image is too large to open{size}; the most is {MAX_OPEN_PIXELS / 1e6:.0f} million)"
        ) from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise MediaError(f"{name}: the image is damaged ({exc})") from None
    if width * height > MAX_OPEN_PIXELS:
        raise MediaError(
            f"{name}: the image is too large to open ({width}×{height}, {width * height / 1e6:.0f} million "
            f"pixels; the most is {MAX_OPEN_PIXELS / 1e6:.0f} million)"
        )
    return width, height, fmt


def _sha256(p: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    try:
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise MediaError(f"{p.name}: cannot be read ({exc.strerror or exc})") from None
    return h.hexdigest()


# -- kept by content --------------------------------------------------------------------------------


class MediaStore:
    """The attached files, each kept once under its SHA-256 in vramchat's data folder."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or media_dir()

    def path_of(self, a: Attachment) -> Path:
        return self.folder / a.id[:2] / f"{a.id}{a.suffix}"

    def has(self, a: Attachment) -> bool:
        return self.path_of(a).is_file()

    def put(self, path: str | os.PathLike[str]) -> Attachment:
        """Check the file and keep a copy (once: a second copy of the same picture costs nothing)."""
        a = inspect(path)
        target = self.path_of(a)
        if target.is_file() and target.stat().st_size == a.size:
            return a
        import shutil

        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.part")
            shutil.copyfile(os.path.expanduser(os.fspath(path)), partial)
            os.replace(partial, target)
        except OSError as exc:
            raise MediaError(f"{a.name}: could not be kept with the chat ({exc.strerror or exc})") from None
        return a


# -- ready for the model ------------------------------------------------------------------------------


def scaled_size(width: int, height: int, limit: int) -> tuple[int, int]:
    """The size that keeps the aspect and has at most `limit` pixels (the size itself when it has)."""
    if width * height <= limit:
        return width, height
    factor = math.sqrt(limit / (width * height))
    return max(1, int(width * factor)), max(1, int(height * factor))


_SEEN: OrderedDict[tuple[str, int], tuple[Media, Scaled | None]] = OrderedDict()
_SEEN_COUNT = 4096  # pictures whose prepared size is remembered (no pixels: their kind and size alone)
_SEEN_LOCK = threading.Lock()


def prepare(a: Attachment, path: Path, limit: int) -> tuple[Media, Scaled | None]:
    """The engine's `Media` for an attachment whose file is at `path`: an image upright, in RGB, at most
    `limit` pixels (and what was scaled); a sound as its bytes."""
    from app.engine.types import Media

    if a.kind == "audio":
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise MediaError(f"{a.name}: cannot be read ({exc.strerror or exc})") from None
        return Media(a.id, "audio", data), None
    return _pixels(a, path, limit)


def _known(a: Attachment, path: Path, limit: int) -> tuple[Media, Scaled | None]:
    """`prepare`'s answer, with no bytes but a way to read them, for a picture prepared before: the engine
    process holds the bytes it was sent, so a later turn sends its key alone and decodes nothing."""
    key = (a.id, limit)
    with _SEEN_LOCK:
        seen = _SEEN.get(key)
        if seen is not None:
            _SEEN.move_to_end(key)
            head, scaled = seen
            return replace(head, reader=lambda: prepare(a, path, limit)[0].data), scaled
    media, scaled = prepare(a, path, limit)
    with _SEEN_LOCK:
        _SEEN[key] = (media.sent(with_data=False), scaled)
        while len(_SEEN) > _SEEN_COUNT:
            _SEEN.popitem(last=False)
    return media, scaled


class MediaShelf:
    """The images of a conversation as the engine is shown them, by id: each prepared once for the plan's
    largest image (`limit` pixels), from the chat's kept copy or the file given (`add`)."""

    def __init__(self, limit: int, store: MediaStore | None = None) -> None:
        self.limit = limit
        self.store = store
        self._items: dict[str, tuple[Attachment, Path]] = {}
        self.scaled: dict[str, Scaled] = {}

    def add(self, a: Attachment, path: Path | None = None) -> None:
        if path is None:
            if self.store is None:
                raise MediaError(f"{a.name}: no file for it")
            path = self.store.path_of(a)
        self._items[a.id] = (a, path)

    def __call__(self, media_id: str) -> Media:
        item = self._items.get(media_id)
        if item is None:
            raise MediaError("an image of this chat is no longer kept")
        media, scaled = _known(item[0], item[1], self.limit)
        if scaled is not None:
            self.scaled[media_id] = scaled
        return media


def _pixels(a: Attachment, path: Path, limit: int) -> tuple[Media, Scaled | None]:
    from PIL import Image, ImageOps

    from app.engine.types import Media

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(path)
        with im:
            width, height = im.size
            if width * height > MAX_OPEN_PIXELS:
                raise MediaError(f"{a.name}: the image is too large to open ({width}×{height})")
            turned = im.getexif().get(0x0112, 1) in (5, 6, 7, 8)  # EXIF orientation: a quarter turn
            upright = (height, width) if turned else (width, height)
            target = scaled_size(*upright, limit)
            if im.format == "JPEG" and target != upright:
                # decode a large JPEG at a fraction of its size: less time, less memory
                im.draft("RGB", (target[1], target[0]) if turned else target)
            rgb = _rgb(ImageOps.exif_transpose(im))
            if rgb.size != target:
                rgb = rgb.resize(target, Image.Resampling.BICUBIC)
    except MediaError:
        raise
    except FileNotFoundError:
        raise MediaError(f"{a.name}: the copy kept with the chat is missing ({path})") from None
    except Exception as exc:  # Pillow's errors for a damaged file are of many kinds
        raise MediaError(f"{a.name}: the image cannot be decoded ({exc})") from None
    scaled = Scaled(a.name, upright, target) if target != upright else None
    return Media(a.id, "image", rgb.tobytes(), rgb.width, rgb.height), scaled


def _rgb(im):  # -> PIL.Image.Image
    """RGB pixels; what is transparent shows on white, as an image viewer shows it."""
    from PIL import Image

    if im.mode in ("RGBA", "LA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return im.convert("RGB")


# -- paths in pasted text ---------------------------------------------------------------------------


def paths_in(text: str) -> list[str]:
    """The existing files named in pasted text, when the text is nothing but file names (a file
    dropped on a terminal pastes its path, often quoted, backslash-escaped or as a file:// URL);
    [] when it is anything else, so that pasting words stays pasting words."""
    import shlex
    from urllib.parse import unquote, urlparse

    text = text.strip()
    if not text or len(text) > 8192:
        return []
    words = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            words += shlex.split(line)
        except ValueError:
            return []
    found = []
    for word in words:
        if word.startswith("file://"):
            word = unquote(urlparse(word).path)
        path = os.path.expanduser(word)
        if not os.path.isfile(path):
            return []
        found.append(path)
    return found

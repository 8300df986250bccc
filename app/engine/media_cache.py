"""The pictures (and sounds) the engine process keeps, so that each crosses the socket once.

The app sends a picture's bytes the first time a prompt carries it, and its key alone after that
(`Media.key`: the file's SHA-256, its kind and the size its pixels were scaled to). `MediaCache`, in the
engine process, keeps the bytes by key, the least recently used going first past `limit` bytes; a
prompt that names a picture no longer kept is answered with the keys it lacks (`p.MISSING_MEDIA`).
"""

from __future__ import annotations

from collections import OrderedDict

from app.engine.types import Media, MediaPrompt

CACHE_BYTES = 256 * 1024 * 1024  # what the engine process keeps of the pictures sent to it

MediaKey = tuple[str, str, int, int]


class MediaCache:
    """The bytes of the pictures the app has sent, by key, at most `limit` bytes of them."""

    def __init__(self, limit: int = CACHE_BYTES) -> None:
        self.limit = limit
        self._bytes: OrderedDict[MediaKey, bytes] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._bytes

    def __len__(self) -> int:
        return len(self._bytes)

    def whole(self, prompt: MediaPrompt) -> MediaPrompt | list[MediaKey]:
        """The prompt with every picture's bytes (those sent now are kept for later prompts), or the keys
        of the pictures it names by key that are no longer kept."""
        missing = [m.key for m in prompt.media if not m.data and m.key not in self._bytes]
        if missing:
            return missing
        media = []
        for m in prompt.media:
            if m.data:
                self._bytes[m.key] = m.data
            self._bytes.move_to_end(m.key)
            media.append(m if m.data else Media(m.id, m.kind, self._bytes[m.key], m.width, m.height))
        while len(self._bytes) > 1 and sum(len(b) for b in self._bytes.values()) > self.limit:
            self._bytes.popitem(last=False)
        return MediaPrompt(prompt.text, tuple(media))

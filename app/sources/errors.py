"""What can go wrong with a model that is not on this machine, each said in one line.

Every one is a `VramchatError` (the command line prints it as one line and exits 1, as for a bad or
missing local file; the picker shows it under its title), never a traceback.
"""

from __future__ import annotations

from app.errors import VramchatError


class SourceError(VramchatError):
    """A remote model cannot be listed, read or downloaded."""

    title = "The model cannot be reached"


class Unreachable(SourceError):
    """No network, a server that does not answer, or offline mode with nothing cached."""

    title = "No connection"


class NotFound(SourceError):
    """A repository, a file or a quant that does not exist (or is private)."""

    title = "Not found"


class Gated(SourceError):
    """A gated repository, and no token (or one without access)."""

    title = "Access needed"


class NoRangeSupport(SourceError):
    """A server that answers a range request with the whole file."""

    title = "The server cannot send part of a file"


class DownloadError(SourceError):
    """A download that failed, was cancelled, or would not fit."""

    title = "The download did not finish"


class NoRoom(DownloadError):
    """Not enough free disk space for a download (said before it starts)."""

    title = "Not enough disk space"


class Cancelled(DownloadError):
    """The user cancelled a download (its partial file is kept, hidden, to resume)."""

    title = "Download cancelled"


class ChecksumFailed(DownloadError):
    """A downloaded file whose sha256 is not the published one (removed: a new download starts over)."""

    title = "Checksum failed"


class AlreadyDownloading(DownloadError):
    """Another vramchat is writing the same file now (its partial file is locked)."""

    title = "Already being downloaded"


class CannotWrite(DownloadError):
    """The disk refused a downloaded file: full, read-only, not ours to write (said with what to do)."""

    title = "The download cannot be written"

"""`ModelSource`: one model wherever its files are, the one idea the picker, `--plan`, `--quants` and
the downloader share.

A model is a file, or the shards of a split model, with the projectors found beside it. Its files
are on this machine (`local`), at an URL (`url`), or in a Hugging Face repo (`hub`); each remote file
carries its size and what identifies its content (the hub's LFS sha256, an URL's ETag), which keys
the header cache and checks a download.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.sources.naming import base_name

LOCAL, URL, HUB = "local", "url", "hub"


@dataclass(frozen=True)
class SourceFile:
    """One GGUF file: its name (a path in the repo, the URL's last part, a local path), its size, where its
    bytes are read from, and what identifies its content."""

    name: str
    size: int
    url: str = ""  # '' for a local file
    identity: str = ""  # sha256 (hub LFS), ETag or Last-Modified (URL); '' when nothing identifies it
    sha256: str | None = None  # the checksum the hub publishes

    @property
    def file_name(self) -> str:
        return base_name(self.name)


@dataclass(frozen=True)
class ModelSource:
    """One model: its files in shard order, its projectors, and where they come from."""

    kind: str  # LOCAL, URL or HUB
    ref: str  # what a plan names it: a path, an URL, hf:ORG/REPO/PATH.gguf
    files: tuple[SourceFile, ...]
    projectors: tuple[SourceFile, ...] = ()
    repo_id: str | None = None
    revision: str | None = None  # the commit the files were listed at (hub)
    quant: str = ""  # the quant tag of the file name ('' when it has none)
    problem: str = ""  # why it cannot be planned as listed (missing shards)
    notes: tuple[str, ...] = field(default=(), compare=False)  # e.g. planned offline, from the cache

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def file_name(self) -> str:
        return self.files[0].file_name if self.files else base_name(self.ref)

    @property
    def is_remote(self) -> bool:
        return self.kind != LOCAL

    def llama_model_flags(self) -> list[str]:
        """How llama-server / llama-cli name this model: -m PATH, -mu URL, or -hfr REPO -hff FILE."""
        if self.kind == URL:
            return ["-mu", self.files[0].url]
        if self.kind == HUB and self.repo_id:
            return ["-hfr", self.repo_id, "-hff", self.files[0].name]
        return ["-m", self.ref]

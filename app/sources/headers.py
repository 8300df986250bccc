"""A remote model's header: read by ranges (shards in parallel), kept, and turned into its anatomy.

The strict reader (planner.gguf.read_gguf_header) reads each file through a `RangeFile`: the first
block, then as much more as the header needs, with every check of the local reader. What it read is
kept (app/sources/remote_cache.py) by the file's identity, and the anatomy by the model's: the second plan of
a remote model reads nothing, online or not.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.sources import remote_cache, url
from app.sources.blocks import first_block_of
from app.sources.http import read_range
from app.sources.model import HUB, ModelSource, SourceFile
from app.sources.refs import HF_PREFIX
from planner.gguf import GGUFFile, read_gguf_header, read_gguf_model
from planner.model import ModelAnatomy

MAX_PARALLEL = 8


@dataclass
class RangeFile:
    """A `planner.gguf.ByteSource` over HTTP: `name` is what errors call it (hf:ORG/REPO/FILE or the URL)."""

    name: str
    size: int
    url: str
    hub: bool
    first: bytes | None = None  # bytes already read from the start of the file

    def read(self, start: int, end: int) -> bytes:
        if self.first is not None and end <= len(self.first):
            return self.first[start:end]
        return read_range(self.url, start, end, hub=self.hub, what=self.name)


@dataclass
class CachedHeader:
    """A `ByteSource` over a header kept in the cache (reads past it are a damaged cache entry)."""

    name: str
    size: int
    data: bytes

    def read(self, start: int, end: int) -> bytes:
        return self.data[start:end]


def shard_name(source: ModelSource, file: SourceFile) -> str:
    """What errors about one shard call it."""
    if source.kind == HUB and source.repo_id:
        return f"{HF_PREFIX}{source.repo_id}/{file.name}"
    return file.url or file.name


def read_header(source: ModelSource, index: int) -> tuple[GGUFFile, bytes]:
    """One shard's header: from the cache, or read by ranges (and kept)."""
    file = source.files[index]
    name = shard_name(source, file)
    cached = remote_cache.load_header(file.identity, file.size)
    if cached is not None:
        try:
            return read_gguf_header(CachedHeader(name, file.size, cached), index)
        except Exception:  # a damaged entry: read it again
            pass
    reader = RangeFile(name, file.size, file.url, source.kind == HUB, url.first_block(file.url))
    header, data = read_gguf_header(reader, index, first_block_of(index))
    remote_cache.keep_header(file.identity, file.size, data)
    return header, data


def read_headers(source: ModelSource) -> list[tuple[GGUFFile, bytes]]:
    """Every shard's header, read in parallel."""
    if len(source.files) == 1:
        return [read_header(source, 0)]
    with ThreadPoolExecutor(min(len(source.files), MAX_PARALLEL)) as pool:
        return list(pool.map(lambda i: read_header(source, i), range(len(source.files))))


def identities(source: ModelSource) -> list[tuple[str, int]]:
    return [(f.identity, f.size) for f in source.files]


def load_anatomy(source: ModelSource) -> ModelAnatomy:
    """The model's anatomy: from the cache when this model (same files) was read before, else from its
    headers."""
    from app.sources.errors import NotFound
    from planner.anatomy import load_anatomy as anatomy_of

    if source.problem:
        raise NotFound(f"{source.ref}: {source.problem}")
    kept = remote_cache.load_anatomy(source.ref, identities(source))
    if kept is not None:
        return kept
    headers = read_headers(source)
    readers = [RangeFile(shard_name(source, f), f.size, f.url, source.kind == HUB) for f in source.files]
    readers[0].name = source.ref
    model = read_gguf_model(readers, headers)  # type: ignore[arg-type]
    anatomy = anatomy_of(model)
    remote_cache.keep_anatomy(source.ref, identities(source), anatomy)
    return anatomy

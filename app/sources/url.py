"""A GGUF file (or split model) at a plain http(s) URL: its size and identity from the first range read.

The first read asks for the first block of each shard (in parallel): its answer gives the file's size
(Content-Range), what identifies it (ETag, else Last-Modified) and the block the header starts with,
kept for the header reader. A URL planned before is asked with a HEAD only, and planned from the cache
when it still names the same file; offline, the last one seen is used.
"""

from __future__ import annotations

import posixpath
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from app.sources import remote_cache
from app.sources.blocks import first_block_of
from app.sources.errors import NotFound, SourceError, Unreachable
from app.sources.http import content_range_total, read_range, translated, url_client
from app.sources.model import URL, ModelSource, SourceFile
from app.sources.naming import quant_of, shard_names
from app.sources.refs import UrlRef

_first_blocks: dict[str, bytes] = {}  # URL -> its first bytes, read while resolving it
_lock = threading.Lock()


def first_block(url: str) -> bytes | None:
    """The first bytes of `url` read while resolving it (once: they are handed over, not kept)."""
    with _lock:
        return _first_blocks.pop(url, None)


def shard_urls(url: str) -> list[str]:
    """The URLs of every shard of the split model `url` names a shard of, or [url]."""
    parts = urllib.parse.urlsplit(url)
    path = urllib.parse.unquote(parts.path)
    names = shard_names(path)
    return [urllib.parse.urlunsplit(parts._replace(path=urllib.parse.quote(n))) for n in names]


def resolve(ref: UrlRef) -> ModelSource:
    urls = shard_urls(ref.url)
    workers = min(len(urls), 8)
    with ThreadPoolExecutor(workers) as pool:
        found = [pool.submit(_identify, u, first_block_of(i)) for i, u in enumerate(urls)]
        files = []
        for index, future in enumerate(found):
            try:
                files.append(future.result())
            except NotFound:
                if index == 0:
                    raise
                name = _file_name(urls[index])
                raise NotFound(
                    f"{urls[0]}: split model: shard {index + 1} of {len(urls)} is missing ({name})"
                ) from None
    notes = tuple(dict.fromkeys(n for _, n in files if n))
    name = _file_name(urls[0])
    return ModelSource(
        kind=URL,
        ref=urls[0] if len(urls) > 1 else ref.url,
        files=tuple(f for f, _ in files),
        quant=quant_of(name),
        notes=notes,
    )


def _identify(url: str, block: int) -> tuple[SourceFile, str]:
    """The file at `url` (its first block kept), and a note when it comes from the cache offline."""
    what = url
    known = remote_cache.load_record("urls", url)
    try:
        if known is not None:
            same = _head_matches(url, known)
            if same:
                return _from_record(url, known), ""
        seen: dict[str, Any] = {}
        data = read_range(url, 0, block, hub=False, what=what, on_response=lambda r: seen.update(r.headers))
    except Unreachable as exc:
        if known is None:
            raise
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(known["saved"]))
        return _from_record(url, known), f"{exc}; planned from the header read on {when}"
    headers = {k.lower(): v for k, v in seen.items()}
    size = content_range_total(headers["content-range"]) if "content-range" in headers else len(data)
    if size is None:
        raise SourceError(f"{what}: the server did not say the file's size")
    identity = _identity(headers)
    with _lock:
        _first_blocks[url] = data
    if identity:
        remote_cache.keep_record("urls", {"size": size, "identity": identity}, url)
    return SourceFile(name=_file_name(url), size=size, url=url, identity=identity), ""


def _identity(headers: dict[str, str]) -> str:
    if headers.get("etag"):
        return f"etag:{headers['etag']}"
    if headers.get("last-modified"):
        return f"modified:{headers['last-modified']}"
    return ""


def _head_matches(url: str, known: dict[str, Any]) -> bool:
    with translated(url, hub=False):
        response = url_client().head(url, headers={"Accept-Encoding": "identity"})
    if response.status_code != 200:
        return False
    headers = {k.lower(): v for k, v in response.headers.items()}
    size = headers.get("content-length")
    return _identity(headers) == known["identity"] and size is not None and int(size) == known["size"]


def _from_record(url: str, known: dict[str, Any]) -> SourceFile:
    return SourceFile(name=_file_name(url), size=int(known["size"]), url=url, identity=str(known["identity"]))


def _file_name(url: str) -> str:
    return posixpath.basename(urllib.parse.unquote(urllib.parse.urlsplit(url).path)) or url

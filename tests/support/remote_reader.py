"""The strict GGUF reader over HTTP: the same file read through a local server by range requests.

The hostile-header tests read each file both ways (`READERS`); the remote way serves it from one
server shared by the test session and reads it as `vramchat --plan URL` does (app/sources).
"""

from __future__ import annotations

import atexit
import itertools
import threading
from collections.abc import Callable
from pathlib import Path

from planner.gguf import GGUFFile, GGUFModel, read_gguf, read_gguf_file
from tests.support.hub_server import LocalHub

_hub: LocalHub | None = None
_lock = threading.Lock()
_names = itertools.count()


def shared_hub() -> LocalHub:
    """A server for the whole test session (started on first use)."""
    global _hub
    with _lock:
        if _hub is None:
            _hub = LocalHub().start()
            atexit.register(_hub.stop)
        return _hub


def serve(path: str | Path) -> str:
    """The URL of `path` on the shared server, with the other shards of a split model beside it (file
    names kept: the shards are found by them)."""
    from planner.gguf import split_shard_paths

    path = Path(path)
    folder = next(_names)
    for shard in split_shard_paths(str(path)):
        if Path(shard).exists() and shard != str(path):
            shared_hub().add_file(f"{folder}/{Path(shard).name}", Path(shard))
    return shared_hub().add_file(f"{folder}/{path.name}", path)


def read_file_over_http(path: str | Path) -> GGUFFile:
    from app.sources import resolve_source
    from app.sources.headers import read_header

    return read_header(resolve_source(serve(path)), 0)[0]


def read_model_over_http(path: str | Path) -> GGUFModel:
    """The model at `path` (every shard) read over HTTP; its name in errors is its URL."""
    from app.sources import resolve_source
    from app.sources.headers import RangeFile, read_headers
    from planner.gguf import read_gguf_model

    source = resolve_source(serve(path))
    headers = read_headers(source)
    readers = [RangeFile(f.url, f.size, f.url, False) for f in source.files]
    return read_gguf_model(readers, headers)  # type: ignore[arg-type]


# reader name -> (read one file, read a model)
READERS: dict[str, tuple[Callable[[Path], GGUFFile], Callable[[Path], GGUFModel]]] = {
    "local": (read_gguf_file, read_gguf),
    "http": (read_file_over_http, read_model_over_http),
}

"""A model on this machine as a `ModelSource`: the file, or every shard of a split model."""

from __future__ import annotations

import os

from app.sources.model import LOCAL, ModelSource, SourceFile
from app.sources.naming import is_projector, quant_of
from planner.gguf import split_shard_paths


def local_source(path: str) -> ModelSource:
    """The model at `path` (missing shards are the reader's to report, as for any local plan)."""
    shards = split_shard_paths(path)
    files = []
    for shard in shards:
        try:
            size = os.path.getsize(shard)
        except OSError:
            size = 0
        files.append(SourceFile(name=shard, size=size))
    folder = os.path.dirname(os.path.abspath(path))
    try:
        beside = sorted(
            os.path.join(folder, n) for n in os.listdir(folder) if n.lower().endswith(".gguf") and is_projector(n)
        )
    except OSError:
        beside = []
    projectors = tuple(SourceFile(name=p, size=os.path.getsize(p)) for p in beside if os.path.isfile(p))
    return ModelSource(
        kind=LOCAL,
        ref=shards[0] if len(shards) > 1 else path,
        files=tuple(files),
        projectors=projectors,
        quant=quant_of(path),
    )

"""Quant labels that tell a repo's models apart.

A repo can hold two models of one quant (a base and an instruct model, two uploads of one model, a
file in a folder and one beside it): their quant alone ("Q4_K_M", "Q4_K_M") makes two rows that look
the same. Those that share a label get the part of their file names that differs ("Q4_K_M · it",
"Q4_K_M · Q4_K_M/" for the one in a folder of that name).
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Sequence

from app.sources.naming import model_stem

_PIECES = re.compile(r"([-./])")  # file-name words and the marks between them (kept, to join them back)


def distinct_labels(labels: Sequence[str], paths: Sequence[str]) -> list[str]:
    """`labels` (one per model, `paths` its first file's path in the repo), each one shared by several
    models followed by what differs in their names; a model whose name holds nothing more keeps its own."""
    shared: dict[str, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        shared[label].append(index)
    result = list(labels)
    for label, indexes in shared.items():
        if len(indexes) < 2:
            continue
        differing = _differing([paths[i] for i in indexes])
        for index, part in zip(indexes, differing, strict=True):
            if part:
                result[index] = f"{label} · {part}"
    return result


def _differing(paths: list[str]) -> list[str]:
    """What each of `paths` holds beyond the words they all begin and end with (their `.gguf` and split
    suffix left out); the whole name where that leaves two the same."""
    names = [posixpath.join(posixpath.dirname(p), model_stem(p)) for p in paths]
    pieces = [_PIECES.split(name) for name in names]
    start = 0
    while all(len(p) > start for p in pieces) and len({p[start] for p in pieces}) == 1:
        start += 1
    end = 0
    while all(len(p) - start > end for p in pieces) and len({p[len(p) - 1 - end] for p in pieces}) == 1:
        end += 1
    parts = ["".join(p[start : len(p) - end]).lstrip("-./").rstrip("-.") for p in pieces]  # a folder keeps its /
    if len(set(parts)) < len(parts):
        return names
    return parts

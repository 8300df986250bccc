"""A chat's messages as a tree: which path is on screen, and each message's place among its alternatives.

Every message names its parent (None for a chat's first); siblings are alternatives to one another
(an edited message beside the one it replaced, a retried reply beside the earlier ones). At each branch
point the sibling chosen last (the highest `chosen`) is the one on screen; the path follows those
choices from the first message down to a leaf.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class Node(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def parent_id(self) -> int | None: ...
    @property
    def chosen(self) -> int: ...


N = TypeVar("N", bound=Node)


def children_of(nodes: Sequence[N]) -> dict[int | None, list[N]]:
    """Each parent's children (None: the first messages), oldest first."""
    out: dict[int | None, list[N]] = {}
    for n in sorted(nodes, key=lambda n: n.id):
        out.setdefault(n.parent_id, []).append(n)
    return out


def active_path(nodes: Sequence[N]) -> list[N]:
    """The messages on screen, first to last: at each branch point the alternative chosen last."""
    children = children_of(nodes)
    path: list[N] = []
    parent: int | None = None
    seen: set[int] = set()
    while children.get(parent):
        node = max(children[parent], key=lambda n: (n.chosen, n.id))
        if node.id in seen:  # a cycle cannot be written by the store; a hand-edited file is not followed round
            break
        seen.add(node.id)
        path.append(node)
        parent = node.id
    return path


def place_among_siblings(nodes: Sequence[N], node: N) -> tuple[int, int]:
    """(position from 1, how many) of `node` among the alternatives at its branch point."""
    siblings = children_of(nodes).get(node.parent_id, [node])
    ids = [s.id for s in siblings]
    return (ids.index(node.id) + 1 if node.id in ids else 1), len(ids)

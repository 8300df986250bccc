"""A replay of ggml's graph allocator (ggml-alloc.c, `ggml_gallocr`).

Given a graph from `planner.ggml_graph`, this walks it exactly as
`ggml_gallocr_alloc_graph_impl` does: leafs first, then inputs, then each node,
reusing a parent's memory in place when ggml would, and freeing a tensor when
its last consumer has run. The peak offset reached in each buffer is the size
llama.cpp allocates for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from planner.ggml_graph import FLAG_INPUT, FLAG_OUTPUT, INPLACE_OPS, Tensor

_HUGE = 1 << 62


def _align(size: int, alignment: int) -> int:
    return (size + alignment - 1) // alignment * alignment


@dataclass
class _Block:
    offset: int
    size: int


@dataclass
class DynAllocator:
    """ggml_dyn_tallocr with a single chunk (buffers have no size limit here)."""

    alignment: int
    blocks: list[_Block] = field(default_factory=lambda: [_Block(0, _HUGE)])
    max_size: int = 0

    def alloc(self, size: int) -> int:
        size = _align(size, self.alignment)
        best = -1
        best_size = _HUGE * 2
        for i in range(len(self.blocks) - 1):
            block = self.blocks[i]
            if block.size >= size and block.size <= best_size:
                best, best_size = i, block.size
        if best == -1:
            best = len(self.blocks) - 1
        block = self.blocks[best]
        offset = block.offset
        block.offset += size
        block.size -= size
        if block.size == 0:
            del self.blocks[best]
        self.max_size = max(self.max_size, offset + size)
        return offset

    def free(self, offset: int, size: int) -> None:
        size = _align(size, self.alignment)
        blocks = self.blocks
        for i, block in enumerate(blocks):
            if block.offset + block.size == offset:
                block.size += size
                if i < len(blocks) - 1 and block.offset + block.size == blocks[i + 1].offset:
                    block.size += blocks[i + 1].size
                    del blocks[i + 1]
                return
            if offset + size == block.offset:
                block.offset = offset
                block.size += size
                if i > 0 and blocks[i - 1].offset + blocks[i - 1].size == block.offset:
                    blocks[i - 1].size += block.size
                    del blocks[i]
                return
        pos = 0
        while pos < len(blocks) and blocks[pos].offset < offset:
            pos += 1
        blocks.insert(pos, _Block(offset, size))


@dataclass
class _HashNode:
    n_children: int = 0
    n_views: int = 0
    buffer: str = ""
    offset: int = 0
    allocated: bool = False


AllocSize = Callable[[Tensor], int]


@dataclass
class BufferType:
    """What the allocator needs to know about a backend's buffer type."""

    name: str
    alignment: int
    alloc_size: AllocSize


def same_layout(a: Tensor, b: Tensor) -> bool:
    return a.type is b.type and a.ne == b.ne and a.nb == b.nb


class GraphAllocator:
    """Replays ggml_gallocr over one graph; `sizes` then holds each buffer's peak."""

    def __init__(self, buffer_types: dict[str, BufferType]) -> None:
        self.buffer_types = buffer_types
        self.allocators = {name: DynAllocator(bt.alignment) for name, bt in buffer_types.items()}
        self.hash: dict[int, _HashNode] = {}

    def _h(self, t: Tensor) -> _HashNode:
        node = self.hash.get(id(t))
        if node is None:
            node = self.hash[id(t)] = _HashNode()
        return node

    def _is_own(self, t: Tensor) -> bool:
        return self._h(t).allocated

    def _is_allocated(self, t: Tensor) -> bool:
        return t.external or self._is_own(t)

    def _free_extra_space(self, node: Tensor, parent: Tensor) -> None:
        hn, p_hn = self._h(node), self._h(parent)
        p_bt = self.buffer_types[p_hn.buffer]
        parent_size = _align(p_bt.alloc_size(parent), p_bt.alignment)
        node_size = _align(self.buffer_types[hn.buffer].alloc_size(node), p_bt.alignment)
        if parent_size > node_size:
            self.allocators[p_hn.buffer].free(p_hn.offset + node_size, parent_size - node_size)

    def _allocate_node(self, node: Tensor, buffer: str) -> None:
        hn = self._h(node)
        if self._is_allocated(node) or node.is_view:
            return
        hn.allocated = True
        if node.op in INPLACE_OPS:
            for parent in node.src:
                if not self._is_own(parent):
                    continue
                if parent.flags & FLAG_OUTPUT or (parent.view_src is not None and parent.view_src.flags & FLAG_OUTPUT):
                    continue
                if not same_layout(node, parent):
                    continue
                p_hn = self._h(parent)
                if p_hn.n_children == 1 and p_hn.n_views == 0:
                    if parent.is_view:
                        view_src = parent.view_src
                        assert view_src is not None
                        vs_hn = self._h(view_src)
                        if vs_hn.n_views == 1 and vs_hn.n_children == 0 and parent.view_offs == 0:
                            hn.buffer, hn.offset = p_hn.buffer, p_hn.offset
                            p_hn.allocated = False
                            vs_hn.allocated = False
                            self._free_extra_space(node, view_src)
                            return
                    else:
                        hn.buffer, hn.offset = p_hn.buffer, p_hn.offset
                        p_hn.allocated = False
                        self._free_extra_space(node, parent)
                        return
        bt = self.buffer_types[buffer]
        hn.buffer = buffer
        hn.offset = self.allocators[buffer].alloc(bt.alloc_size(node))

    def _free_node(self, node: Tensor) -> None:
        if node.flags & FLAG_OUTPUT:
            return
        hn = self._h(node)
        bt = self.buffer_types[hn.buffer]
        self.allocators[hn.buffer].free(hn.offset, bt.alloc_size(node))
        hn.allocated = False

    def run(self, nodes: list[Tensor], leafs: list[Tensor],
            node_buffer: Callable[[int, Tensor], str], leaf_buffer: Callable[[int, Tensor], str]) -> None:
        """ggml_gallocr_alloc_graph_impl."""
        self.hash.clear()
        for i, leaf in enumerate(leafs):
            self._allocate_node(leaf, leaf_buffer(i, leaf))

        for i, node in enumerate(nodes):
            if node.is_view and node.op != "NONE":
                assert node.view_src is not None
                self._h(node.view_src).n_views += 1
            if node.flags & FLAG_INPUT:
                self._allocate_node(node, node_buffer(i, node))
            for src in node.src:
                self._h(src).n_children += 1
                if src.flags & FLAG_INPUT:
                    self._allocate_node(src, node_buffer(i, node))

        for i, node in enumerate(nodes):
            buffer = node_buffer(i, node)
            for parent in node.src:
                self._allocate_node(parent, buffer)
            self._allocate_node(node, buffer)
            for parent in node.src:
                p_hn = self._h(parent)
                p_hn.n_children -= 1
                if p_hn.n_children == 0 and p_hn.n_views == 0:
                    if parent.is_view:
                        view_src = parent.view_src
                        assert view_src is not None
                        vs_hn = self._h(view_src)
                        vs_hn.n_views -= 1
                        if vs_hn.n_views == 0 and vs_hn.n_children == 0 and vs_hn.allocated:
                            self._free_node(view_src)
                    elif p_hn.allocated:
                        self._free_node(parent)

    @property
    def sizes(self) -> dict[str, int]:
        return {name: alloc.max_size for name, alloc in self.allocators.items()}


def reserve(graphs: list[tuple[list[Tensor], list[Tensor]]], buffer_types: dict[str, BufferType],
            node_buffer: Callable[[int, Tensor], str] | None = None,
            leaf_buffer: Callable[[int, Tensor], str] | None = None) -> dict[str, int]:
    """Sizes of the compute buffers after reserving each graph in turn (ggml_gallocr_reserve_n).

    A buffer is reallocated only when a graph needs more, so each size is the
    maximum over the graphs.
    """
    default = next(iter(buffer_types))
    sizes = dict.fromkeys(buffer_types, 0)
    for nodes, leafs in graphs:
        allocator = GraphAllocator(buffer_types)
        allocator.run(nodes, leafs,
                      node_buffer or (lambda i, t: default),
                      leaf_buffer or (lambda i, t: default))
        for name, size in allocator.sizes.items():
            sizes[name] = max(sizes[name], size)
    return sizes

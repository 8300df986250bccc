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
    """A free block of the dynamic allocator."""

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
    """Replays ggml_gallocr over one graph; `sizes` then holds each buffer's peak.

    The allocator's per-tensor state (children, views, address) is kept in the
    tensors' `a_*` scratch fields, reset at the start of each run.
    """

    def __init__(self, buffer_types: dict[str, BufferType]) -> None:
        self.buffer_types = buffer_types
        self.allocators = {name: DynAllocator(bt.alignment) for name, bt in buffer_types.items()}

    def _free_extra_space(self, node: Tensor, parent: Tensor) -> None:
        p_bt = self.buffer_types[parent.a_buffer]
        parent_size = _align(p_bt.alloc_size(parent), p_bt.alignment)
        node_size = _align(self.buffer_types[node.a_buffer].alloc_size(node), p_bt.alignment)
        if parent_size > node_size:
            self.allocators[parent.a_buffer].free(parent.a_offset + node_size, parent_size - node_size)

    def _allocate_node(self, node: Tensor, buffer: str) -> None:
        if node.external or node.a_allocated or node.view_src is not None:
            return
        node.a_allocated = True
        if node.op in INPLACE_OPS:
            for parent in node.src:
                if not parent.a_allocated:
                    continue
                if parent.flags & FLAG_OUTPUT or (parent.view_src is not None and parent.view_src.flags & FLAG_OUTPUT):
                    continue
                if not same_layout(node, parent):
                    continue
                if parent.a_children == 1 and parent.a_views == 0:
                    if parent.view_src is not None:
                        view_src = parent.view_src
                        if view_src.a_views == 1 and view_src.a_children == 0:
                            node.a_buffer, node.a_offset = parent.a_buffer, parent.a_offset
                            parent.a_allocated = False
                            view_src.a_allocated = False
                            self._free_extra_space(node, view_src)
                            return
                    else:
                        node.a_buffer, node.a_offset = parent.a_buffer, parent.a_offset
                        parent.a_allocated = False
                        self._free_extra_space(node, parent)
                        return
        bt = self.buffer_types[buffer]
        node.a_buffer = buffer
        node.a_offset = self.allocators[buffer].alloc(bt.alloc_size(node))

    def _free_node(self, node: Tensor) -> None:
        if node.flags & FLAG_OUTPUT:
            return
        bt = self.buffer_types[node.a_buffer]
        self.allocators[node.a_buffer].free(node.a_offset, bt.alloc_size(node))
        node.a_allocated = False

    @staticmethod
    def _reset(tensors: list[Tensor]) -> None:
        for t in tensors:
            t.a_children = t.a_views = 0
            t.a_allocated = False
            for src in t.src:
                src.a_children = src.a_views = 0
                src.a_allocated = False
                if src.view_src is not None:
                    src.view_src.a_children = src.view_src.a_views = 0
                    src.view_src.a_allocated = False
            if t.view_src is not None:
                t.view_src.a_children = t.view_src.a_views = 0
                t.view_src.a_allocated = False

    def run(
        self,
        nodes: list[Tensor],
        leafs: list[Tensor],
        node_buffer: Callable[[int, Tensor], str],
        leaf_buffer: Callable[[int, Tensor], str],
    ) -> None:
        """ggml_gallocr_alloc_graph_impl."""
        self._reset(leafs)
        self._reset(nodes)
        for i, leaf in enumerate(leafs):
            self._allocate_node(leaf, leaf_buffer(i, leaf))

        for i, node in enumerate(nodes):
            if node.view_src is not None and node.op != "NONE":
                node.view_src.a_views += 1
            if node.flags & FLAG_INPUT:
                self._allocate_node(node, node_buffer(i, node))
            for src in node.src:
                src.a_children += 1
                if src.flags & FLAG_INPUT:
                    self._allocate_node(src, node_buffer(i, node))

        for i, node in enumerate(nodes):
            buffer = node_buffer(i, node)
            for parent in node.src:
                self._allocate_node(parent, buffer)
            self._allocate_node(node, buffer)
            for parent in node.src:
                parent.a_children -= 1
                if parent.a_children == 0 and parent.a_views == 0:
                    view_src = parent.view_src
                    if view_src is not None:
                        view_src.a_views -= 1
                        if view_src.a_views == 0 and view_src.a_children == 0 and view_src.a_allocated:
                            self._free_node(view_src)
                    elif parent.a_allocated:
                        self._free_node(parent)

    @property
    def sizes(self) -> dict[str, int]:
        return {name: alloc.max_size for name, alloc in self.allocators.items()}


def reserve(
    graphs: list[tuple[list[Tensor], list[Tensor]]],
    buffer_types: dict[str, BufferType],
    node_buffer: Callable[[int, Tensor], str] | None = None,
    leaf_buffer: Callable[[int, Tensor], str] | None = None,
) -> dict[str, int]:
    """Sizes of the compute buffers after reserving each graph in turn (ggml_gallocr_reserve_n).

    A buffer is reallocated only when a graph needs more, so each size is the
    maximum over the graphs.
    """
    default = next(iter(buffer_types))
    sizes = dict.fromkeys(buffer_types, 0)
    for nodes, leafs in graphs:
        allocator = GraphAllocator(buffer_types)
        allocator.run(nodes, leafs, node_buffer or (lambda i, t: default), leaf_buffer or (lambda i, t: default))
        for name, size in allocator.sizes.items():
            sizes[name] = max(sizes[name], size)
    return sizes

"""ggml-vulkan's reordering of each split's nodes before they are allocated (`ggml_vk_graph_optimize`).

The scheduler hands every split to its backend's graph_optimize before it builds the graph the allocator
reserves (ggml-backend.cpp:1478, `ggml_backend_graph_optimize` in ggml_backend_sched_split_graph). ggml-vulkan
(ggml-vulkan.cpp:14667) moves independent nodes next to each other so that they can run without a barrier
between them, keeps its fusion patterns together, and asks that the inputs of a fused MoE top-k stay alive until
the fused op's last node (ggml-vulkan.cpp:14762, `add_alloc_dep`; the scheduler adds one NONE node per ten such
inputs after that node, ggml-backend.cpp:1542). The order changes which tensors are alive at once and so the
compute buffer's peak: a qwen2moe at full offload with a q8_0 K cache without flash attention reserved 33 MB
more on the device than the graph's own order gives. GGML_VK_DISABLE_GRAPH_OPTIMIZE turns it off.

This is a port of that function for the planner's graphs, in its own order of checks. One fact the graphs do
not record is taken as given: which unary op a UNARY node is; it is taken to be one that fuses with a following
MUL (GELU, SIGMOID, SILU, SOFTPLUS: `ggml_vk_unary_mul_op_index`), as the activations of the graphs are.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from planner.ggml_graph import FLAG_OUTPUT, Tensor

_EMPTY = frozenset({"NONE", "RESHAPE", "TRANSPOSE", "VIEW", "PERMUTE"})
_MAX_SRC = 10  # GGML_MAX_SRC
_NUM_TO_CHECK = 20

# ggml-vulkan-types.h: the fusion patterns graph_optimize keeps together
_TOPK_MOE_EARLY_SOFTMAX_NORM = (
    "SOFT_MAX", "RESHAPE", "ARGSORT", "VIEW", "GET_ROWS", "RESHAPE", "SUM_ROWS", "CLAMP", "DIV", "RESHAPE",
)  # fmt: skip
_TOPK_MOE_SIGMOID_NORM_BIAS = (
    "UNARY", "RESHAPE", "ADD", "ARGSORT", "VIEW", "GET_ROWS", "RESHAPE", "SUM_ROWS", "CLAMP", "DIV", "RESHAPE",
)  # fmt: skip
_TOPK_MOE_SQRT_SOFTPLUS_NORM_BIAS = (
    "UNARY", "SQRT", "RESHAPE", "ADD", "ARGSORT", "VIEW", "GET_ROWS", "RESHAPE", "SUM_ROWS", "CLAMP", "DIV",
    "RESHAPE",
)  # fmt: skip
_TOPK_MOE_EARLY_SOFTMAX = ("SOFT_MAX", "RESHAPE", "ARGSORT", "VIEW", "GET_ROWS")
_TOPK_MOE_LATE_SOFTMAX = ("ARGSORT", "VIEW", "GET_ROWS", "RESHAPE", "SOFT_MAX", "RESHAPE")
_SNAKE = ("MUL", "SIN", "SQR", "MUL", "ADD")
_TOPK_QSA = ("GET_ROWS", "PERMUTE", "CONT", "CPY", "RESHAPE", "ADD", "TOP_K")
_RMS_NORM_MUL_ADD_MUL = ("RMS_NORM", "MUL", "ADD", "MUL")
_RMS_NORM_MUL_ADD = ("RMS_NORM", "MUL", "ADD")
_RMS_NORM_MUL_ROPE_VIEW_SET_ROWS = ("RMS_NORM", "MUL", "ROPE", "VIEW", "SET_ROWS")
_RMS_NORM_VIEW_SET_ROWS = ("RMS_NORM", "VIEW", "SET_ROWS")
_ROPE_VIEW_SET_ROWS = ("ROPE", "VIEW", "SET_ROWS")
_HC_POST_GATE = ("SCALE", "UNARY", "SCALE", "DSV4_HC_POST")

_TOPK_MOE: tuple[tuple[str, ...], ...] = (
    _TOPK_MOE_EARLY_SOFTMAX_NORM,
    _TOPK_MOE_SIGMOID_NORM_BIAS,
    _TOPK_MOE_SQRT_SOFTPLUS_NORM_BIAS,
    _TOPK_MOE_EARLY_SOFTMAX,
    _TOPK_MOE_LATE_SOFTMAX,
)
_KEPT: tuple[tuple[str, ...], ...] = (
    _SNAKE,
    _TOPK_QSA,
    _RMS_NORM_MUL_ADD_MUL,
    _RMS_NORM_MUL_ADD,
    _RMS_NORM_MUL_ROPE_VIEW_SET_ROWS,
    _RMS_NORM_VIEW_SET_ROWS,
    _ROPE_VIEW_SET_ROWS,
)
# patterns a node pulled forward must not start (the first pass's skip list)
_NOT_PULLED = (*_TOPK_MOE, _SNAKE, *_KEPT[2:], _HC_POST_GATE)

# the pairs the dependency check lets run back to back (producer op, consumer op, adjacent only)
_FUSED_PAIRS = {
    ("MUL_MAT", "ADD"),
    ("MUL_MAT_ID", "ADD_ID"),
    ("MUL_MAT_ID", "MUL"),
    ("ADD", "ADD"),
    ("SSM_CONV", "ADD"),
    ("SSM_CONV", "UNARY"),
}


def enabled() -> bool:
    """ggml-vulkan.cpp:4023: GGML_VK_DISABLE_GRAPH_OPTIMIZE in the environment of the load turns it off."""
    return os.environ.get("GGML_VK_DISABLE_GRAPH_OPTIMIZE") is None


def _base(t: Tensor) -> Tensor:
    return t.view_src if t.view_src is not None else t


def _is_empty(t: Tensor) -> bool:
    return t.op in _EMPTY


def _is_src_of(dst: Tensor, src: Tensor) -> bool:
    """Whether dst must run after src: it reads it, or one of them writes storage the other reads."""
    if any(s is src for s in dst.src):
        return True
    if not (_is_empty(dst) or _is_empty(src)):
        if any(s is not None and _base(s) is _base(src) for s in dst.src):
            return True
        if any(s is not None and _base(dst) is _base(s) for s in src.src):
            return True
    return _base(dst) is _base(src)


def _is_contiguous_1(t: Tensor) -> bool:
    """ggml_is_contiguous_1: packed rows, the second dimension free."""
    next_nb = t.type.type_size
    if t.ne[0] != t.type.block_size and t.nb[0] != next_nb:
        return False
    next_nb *= t.ne[0] // t.type.block_size
    for i in range(1, 4):
        if t.ne[i] != 1:
            if i > 1:
                if t.nb[i] != next_nb:
                    return False
                next_nb *= t.ne[i]
            else:
                next_nb = t.ne[i] * t.nb[i]
    return True


def _can_repeat(a: Tensor, b: Tensor) -> bool:
    if any(n == 0 for n in a.ne):
        return any(n == 0 for n in b.ne)
    return all(nb_ % na == 0 for na, nb_ in zip(a.ne, b.ne))


def _can_fuse_unary_mul(unary: Tensor, mul: Tensor) -> bool:
    """ggml_vk_can_fuse_unary_mul (ggml-vulkan.cpp:13426), the unary op taken as one it fuses."""
    if unary.type.name not in ("f32", "f16") or unary.type is not mul.type:
        return False
    if not any(s is unary for s in mul.src[:2]):
        return False
    other = mul.src[1] if mul.src[0] is unary else mul.src[0]
    if other is None or other.type is not unary.type:
        return False
    if not (_is_contiguous_1(other) and unary.src and _is_contiguous_1(unary.src[0])):
        return False
    return _can_repeat(other, unary) if mul.src[0] is unary else _can_repeat(unary, mul.src[0])


class _Reorder:
    def __init__(self, nodes: Sequence[Tensor], use_count: dict[int, int]) -> None:
        self.nodes = nodes
        self.n = len(nodes)
        self.use_count = use_count
        self.used = [False] * self.n
        self.used_set: set[int] = set()
        self.order: list[int] = []
        self.first_unused = 0
        self.deps: dict[int, list[Tensor]] = {}

    def match(self, pattern: Sequence[str], start: int) -> bool:
        if start < 0 or start + len(pattern) > self.n:
            return False
        return all(self.nodes[start + j].op == op and not self.used[start + j] for j, op in enumerate(pattern))

    def _take(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.order.append(i)
            self.used_set.add(id(self.nodes[i]))
            self.used[i] = True
        while self.first_unused < self.n and self.used[self.first_unused]:
            self.first_unused += 1

    def keep(self, pattern: Sequence[str]) -> bool:
        if not self.match(pattern, self.first_unused):
            return False
        self._take(range(self.first_unused, self.first_unused + len(pattern)))
        return True

    def add_pattern_deps(self, pattern: Sequence[str], last: int) -> None:
        """Keep the pattern's outside inputs alive through its last node (ggml-vulkan.cpp:14754)."""
        seen: set[int] = set()
        until = self.deps.setdefault(id(self.nodes[last]), [])
        for j in range(len(pattern)):
            node = self.nodes[self.first_unused + j]
            for src in node.src:
                if src is not None and id(src) not in seen:
                    seen.add(id(src))
                    if not any(k is src for k in until):
                        until.append(src)
            seen.add(id(node))

    def keep_topk_moe(self, pattern: Sequence[str]) -> bool:
        if not self.match(pattern, self.first_unused):
            return False
        last = self.first_unused + len(pattern) - 1
        if last + 1 < self.n and self.nodes[last + 1].op == "SCALE":  # some variants fuse a trailing scale
            last += 1
        self.add_pattern_deps(pattern, last)
        return self.keep(pattern)

    def empty_or_scheduled_between(self, lo: int, hi: int) -> bool:
        return all(self.used[v] or _is_empty(self.nodes[v]) for v in range(lo, hi))

    def can_fuse_subgraph(self, idxs: Sequence[int], ops: Sequence[str], outputs: Sequence[int]) -> bool:
        """ggml_can_fuse_subgraph_ext (ggml.c:7769): every non-output node used only inside the subgraph."""
        members = {id(self.nodes[i]) for i in idxs}
        for pos, i in enumerate(idxs):
            node = self.nodes[i]
            if node.op != ops[pos]:
                return False
            if i in outputs:
                continue
            if node.flags & FLAG_OUTPUT:
                return False
            uses = sum(1 for k in idxs[pos + 1 :] for s in self.nodes[k].src if s is node)
            if uses != self.use_count.get(id(node), 0):
                return False
            view = node.view_src
            while view is not None:
                if id(view) not in members and not view.weight:
                    return False
                view = view.view_src
        return True

    def _blocks(self, c: int, j: int, last: int) -> bool:
        """The first pass's dependency check: node j may not move before unused node c."""
        nodes = self.nodes
        if self.used[c] or not _is_src_of(nodes[j], nodes[c]):
            return False
        cop, jop = nodes[c].op, nodes[j].op
        if c == last and cop in ("RMS_NORM", "UNARY") and jop == "MUL":
            return not self.empty_or_scheduled_between(c + 1, j)
        return not (j == c + 1 and c == last and (cop, jop) in _FUSED_PAIRS)

    def _pull_rope_and_set_rows(self, j: int, current: list[int]) -> None:
        nodes, n = self.nodes, self.n
        rope_idx = j
        if j > 0 and nodes[j].op == "MUL" and nodes[j - 1].op == "RMS_NORM":
            for k in range(j + 1, min(j + 15, n)):
                rope = nodes[k]
                if (
                    rope.op == "ROPE"
                    and rope.src[0] is nodes[j]
                    and len(rope.src) > 1
                    and rope.src[1].op == "NONE"
                    and (len(rope.src) < 3 or rope.src[2].op == "NONE")
                ):
                    rope_idx = k
                    current.append(k)
                    self.used[k] = True
                    break
        if nodes[rope_idx].op not in ("ROPE", "RMS_NORM"):
            return
        view_idx = set_rows_idx = -1
        for k in range(rope_idx + 1, min(rope_idx + 15, n)):
            if self.used[k]:
                continue
            t = nodes[k]
            if view_idx == -1 and t.op == "VIEW" and t.src and t.src[0] is nodes[rope_idx]:
                view_idx = k
                continue
            if view_idx != -1 and t.op == "SET_ROWS" and t.src and t.src[0] is nodes[view_idx]:
                set_rows_idx = k
                break
        if set_rows_idx == -1:
            return
        idxs = (rope_idx, view_idx, set_rows_idx)
        can_pull = self.can_fuse_subgraph(idxs, (nodes[rope_idx].op, "VIEW", "SET_ROWS"), (set_rows_idx,))
        for c in range(rope_idx + 1, set_rows_idx):
            if not can_pull:
                break
            if (
                not self.used[c]
                and c != view_idx
                and not _is_empty(nodes[c])
                and _is_src_of(nodes[set_rows_idx], nodes[c])
            ):
                can_pull = False
        if can_pull:
            current += [view_idx, set_rows_idx]
            self.used[view_idx] = self.used[set_rows_idx] = True

    def _pull_consumer(self, j: int, current: list[int]) -> None:
        """MUL_MAT_ID + ADD_ID + MUL, MUL_MAT + ADD + ADD, SSM_CONV + ADD + UNARY, UNARY + MUL."""
        nodes, n = self.nodes, self.n
        prev = nodes[j - 1].op if j > 0 else ""
        op = nodes[j].op

        def ready(t: Tensor | None) -> bool:
            return t is not None and (t.op == "NONE" or id(t) in self.used_set)

        for k in range(j + 1, min(j + 15, n)):
            t = nodes[k]
            src0 = t.src[0] if t.src else None
            src1 = t.src[1] if len(t.src) > 1 else None
            hit = False
            if op == "ADD_ID" and prev == "MUL_MAT_ID":
                hit = t.op == "MUL" and src0 is nodes[j] and ready(src1)
            elif op == "ADD" and prev == "MUL_MAT":
                hit = t.op == "ADD" and src0 is nodes[j] and ready(src1)
            elif op == "ADD" and prev == "SSM_CONV":
                hit = t.op == "UNARY" and src0 is nodes[j]
            elif op == "UNARY" and j > 0:
                if t.op != "MUL" or (src0 is not nodes[j] and src1 is not nodes[j]):
                    continue
                other = src1 if src0 is nodes[j] else src0
                hit = ready(other) and _can_fuse_unary_mul(nodes[j], t)
            else:
                return
            if hit:
                current.append(k)
                self.used[k] = True
                return

    def _pattern_at(self, j: int) -> bool:
        if any(self.match(p, j) for p in _NOT_PULLED):
            return True
        return any(self.match(_TOPK_QSA, j - o) for o in range(len(_TOPK_QSA)))

    def step(self) -> None:
        if any(self.keep_topk_moe(pattern) for pattern in _TOPK_MOE) or any(self.keep(p) for p in _KEPT):
            return
        if self.match(_HC_POST_GATE, self.first_unused):
            self.add_pattern_deps(_HC_POST_GATE, self.first_unused + len(_HC_POST_GATE) - 1)
            self.keep(_HC_POST_GATE)
            return
        nodes, first = self.nodes, self.first_unused
        current = [first]
        window = range(first + 1, min(first + _NUM_TO_CHECK, self.n))
        for j in window:  # real nodes that depend on nothing still waiting
            if self.used[j] or _is_empty(nodes[j]) or self._pattern_at(j):
                continue
            if any(self._blocks(c, j, current[-1]) for c in range(first, j)):
                continue
            current.append(j)
            self._pull_rope_and_set_rows(j, current)
            self._pull_consumer(j, current)
        if nodes[current[-1]].op != "ADD":  # then the views, unless that splits add->rms_norm or add->add
            for j in window:
                if self.used[j] or not _is_empty(nodes[j]):
                    continue
                if not any(
                    not self.used[c] and _is_src_of(nodes[j], nodes[c]) and c not in current for c in range(first, j)
                ):
                    current.append(j)
        self._take(current)

    def run(self) -> None:
        while self.first_unused < self.n:
            self.step()


def vulkan_order(nodes: Sequence[Tensor], use_count: dict[int, int]) -> tuple[list[int], dict[int, list[Tensor]]]:
    """The split's node order after ggml_vk_graph_optimize, as indices into `nodes`, and the tensors to keep
    alive until a node (keyed by that node's id).

    `use_count` is the whole graph's count of uses of each node (ggml's use_counts, by id)."""
    reorder = _Reorder(nodes, use_count)
    reorder.run()
    return reorder.order, reorder.deps


__all__ = ["enabled", "vulkan_order"]

"""A shape-only mirror of the ggml graph API.

llama.cpp sizes its compute buffers by building the model's graph for a
worst-case micro-batch and handing it to ggml's graph allocator. To predict
those buffers exactly, the planner builds the same graph here: the same ops in
the same order, with the same shapes, strides, views and flags, but no data.
`planner.ggml_alloc` then replays the allocator over it.

Only what allocation depends on is modelled: output shape and type of each op,
whether it is a view, which ops may run in place, and graph order (ggml's
depth-first `ggml_visit_parents`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.ggml_types import F16, F32, I32, I64, GGMLType, ggml_type

FLAG_INPUT = 1
FLAG_OUTPUT = 2

# ops whose result may reuse the memory of a parent (ggml_op_can_inplace)
INPLACE_OPS = frozenset(
    {
        "FILL",
        "SCALE",
        "DIAG_MASK_ZERO",
        "DIAG_MASK_INF",
        "ADD",
        "ADD_ID",
        "ADD1",
        "SUB",
        "MUL",
        "DIV",
        "SQR",
        "SQRT",
        "LOG",
        "UNARY",
        "ROPE",
        "ROPE_BACK",
        "SILU_BACK",
        "RMS_NORM",
        "RMS_NORM_BACK",
        "CLAMP",
        "SOFT_MAX",
        "SOFT_MAX_BACK",
    }
)


@dataclass(eq=False, slots=True)
class Tensor:
    """A ggml tensor of a replayed graph: shape, strides, op, sources and view."""

    type: GGMLType
    ne: tuple[int, int, int, int]
    nb: tuple[int, int, int, int]
    op: str = "NONE"
    src: list[Tensor] = field(default_factory=list)
    view_src: Tensor | None = None
    view_offs: int = 0
    flags: int = 0
    # weights, KV cache and other tensors that already live in a buffer
    external: bool = False
    name: str = ""
    # where a pre-allocated tensor lives: a GPU backend name, or "host"
    backend: str | None = None
    # a model weight (its buffer is marked as holding weights), and for host weights whether
    # that buffer is a plain host buffer (mapped or CPU) rather than the CPU_REPACK one
    weight: bool = False
    host_plain: bool = True
    # layer whose device llama.cpp's graph callback pins this tensor to (named "norm")
    pin_layer: int | None = None
    # a feed-forward activation's function (gelu, silu, ...), where the builder knows it: speed prices it
    act: str = ""
    # ggml's source slot of each entry of `src` where an absent source left a gap (a FLASH_ATTN_EXT with sinks
    # and no mask: src[4] in ggml); None: src[i] is ggml's src[i]. A device's supports_op reads slots
    src_slots: tuple[int, ...] | None = None
    # scratch state of the allocator and scheduler replays (reset by each run)
    a_children: int = 0
    a_views: int = 0
    a_allocated: bool = False
    a_buffer: str = ""
    a_offset: int = 0
    s_backend: int = -1
    s_epoch: int = 0

    @property
    def is_view(self) -> bool:
        return self.view_src is not None

    def nbytes(self) -> int:
        """ggml_nbytes (written out for the four dimensions: the replays ask it of every tensor, many times)."""
        n0, n1, n2, n3 = self.ne
        if n0 <= 0 or n1 <= 0 or n2 <= 0 or n3 <= 0:
            return 0
        b0, b1, b2, b3 = self.nb
        rest = (n1 - 1) * b1 + (n2 - 1) * b2 + (n3 - 1) * b3
        block = self.type.block_size
        if block == 1:
            return self.type.type_size + (n0 - 1) * b0 + rest
        return n0 * b0 // block + rest

    def source(self, slot: int) -> Tensor | None:
        """ggml's src[slot]: None where the op has no source there."""
        if self.src_slots is None:
            return self.src[slot] if slot < len(self.src) else None
        return next((t for i, t in zip(self.src_slots, self.src) if i == slot), None)

    def is_contiguous(self) -> bool:
        return self.nb == _contiguous_strides(self.type, self.ne)

    def n_elements(self) -> int:
        return self.ne[0] * self.ne[1] * self.ne[2] * self.ne[3]

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Tensor({self.name or self.op}, {self.type.name}, {self.ne})"


def _contiguous_strides(type_: GGMLType, ne: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    nb0 = type_.type_size
    nb1 = nb0 * (ne[0] // type_.block_size)
    nb2 = nb1 * ne[1]
    nb3 = nb2 * ne[2]
    return (nb0, nb1, nb2, nb3)


def _ne4(ne: tuple[int, ...] | list[int]) -> tuple[int, int, int, int]:
    if len(ne) == 4:
        return (ne[0], ne[1], ne[2], ne[3])
    padded = list(ne) + [1] * (4 - len(ne))
    return (padded[0], padded[1], padded[2], padded[3])


def row_size(type_: GGMLType, n: int) -> int:
    return type_.type_size * n // type_.block_size


class Graph:
    """Builds tensors the way ggml's ops do, and records graph order."""

    def __init__(self) -> None:
        self.nodes: list[Tensor] = []
        self.leafs: list[Tensor] = []
        self._visited: set[int] = set()

    # -- tensor creation ---------------------------------------------------------------------

    def new_tensor(self, type_: GGMLType | str, ne: tuple[int, ...] | list[int], name: str = "") -> Tensor:
        t = type_ if isinstance(type_, GGMLType) else ggml_type(type_)
        ne4 = _ne4(ne)
        return Tensor(t, ne4, _contiguous_strides(t, ne4), name=name)

    def input(self, type_: GGMLType | str, ne: tuple[int, ...] | list[int], name: str = "") -> Tensor:
        tensor = self.new_tensor(type_, ne, name)
        tensor.flags |= FLAG_INPUT
        return tensor

    def weight(
        self,
        type_: GGMLType,
        ne: tuple[int, ...] | list[int],
        name: str = "",
        backend: str | None = None,
        is_weight: bool = True,
        host_plain: bool = True,
    ) -> Tensor:
        """A pre-allocated tensor: a model weight, or (is_weight=False) a KV cache tensor."""
        tensor = self.new_tensor(type_, ne, name)
        tensor.external = True
        tensor.backend = backend
        tensor.weight = is_weight
        tensor.host_plain = host_plain
        return tensor

    def _op(self, op: str, type_: GGMLType, ne: tuple[int, ...], srcs: list[Tensor | None], name: str = "") -> Tensor:
        result = self.new_tensor(type_, ne, name)
        result.op = op
        result.src = [s for s in srcs if s is not None]
        slots = [i for i, s in enumerate(srcs) if s is not None]
        if slots and slots[-1] != len(slots) - 1:  # a gap before the last source
            result.src_slots = tuple(slots)
        return result

    def dup(self, a: Tensor, op: str, srcs: list[Tensor | None]) -> Tensor:
        """ggml_dup_tensor: a new contiguous tensor with a's type and shape."""
        return self._op(op, a.type, a.ne, srcs)

    def _view(
        self, a: Tensor, op: str, ne: tuple[int, ...], nb: tuple[int, int, int, int] | None, offset: int
    ) -> Tensor:
        base, offs = (a.view_src, a.view_offs + offset) if a.view_src is not None else (a, offset)
        ne4 = _ne4(ne)
        result = Tensor(
            a.type,
            ne4,
            _contiguous_strides(a.type, ne4) if nb is None else nb,
            op=op,
            src=[a],
            view_src=base,
            view_offs=offs,
        )
        return result

    # -- views -----------------------------------------------------------------------------

    def reshape(self, a: Tensor, *ne: int) -> Tensor:
        return self._view(a, "RESHAPE", ne, None, 0)

    def view(self, a: Tensor, ne: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Tensor:
        """ggml_view_{1,2,3,4}d: `strides` are nb1.. (nb0 is the element size)."""
        nb = [a.type.type_size, *strides]
        ne4 = _ne4(ne)
        for i in range(len(nb), 4):
            nb.append(nb[i - 1] * ne4[i - 1])
        return self._view(a, "VIEW", ne4, (nb[0], nb[1], nb[2], nb[3]), offset)

    def permute(self, a: Tensor, ax0: int, ax1: int, ax2: int, ax3: int) -> Tensor:
        ne = [0, 0, 0, 0]
        nb = [0, 0, 0, 0]
        for src_axis, dst_axis in enumerate((ax0, ax1, ax2, ax3)):
            ne[dst_axis] = a.ne[src_axis]
            nb[dst_axis] = a.nb[src_axis]
        return self._view(a, "PERMUTE", tuple(ne), (nb[0], nb[1], nb[2], nb[3]), 0)

    def transpose(self, a: Tensor) -> Tensor:
        ne = (a.ne[1], a.ne[0], a.ne[2], a.ne[3])
        nb = (a.nb[1], a.nb[0], a.nb[2], a.nb[3])
        return self._view(a, "TRANSPOSE", ne, nb, 0)

    def view_tensor(self, a: Tensor, op: str, srcs: list[Tensor | None]) -> Tensor:
        """ggml_view_tensor used as an op result (set_rows, cpy into a destination)."""
        result = self._view(a, op, a.ne, a.nb, 0)
        result.src = [s for s in srcs if s is not None]
        return result

    # -- ops -------------------------------------------------------------------------------

    def get_rows(self, a: Tensor, rows: Tensor) -> Tensor:
        type_ = I32 if a.type is I32 else F32
        return self._op("GET_ROWS", type_, (a.ne[0], rows.ne[0], rows.ne[1], rows.ne[2]), [a, rows])

    def mul_mat(self, a: Tensor, b: Tensor) -> Tensor:
        return self._op("MUL_MAT", F32, (a.ne[1], b.ne[1], b.ne[2], b.ne[3]), [a, b])

    def mul_mat_id(self, a: Tensor, b: Tensor, ids: Tensor) -> Tensor:
        return self._op("MUL_MAT_ID", F32, (a.ne[1], ids.ne[0], b.ne[2], 1), [a, b, ids])

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        return self.dup(a, "ADD", [a, b])

    def mul(self, a: Tensor, b: Tensor) -> Tensor:
        return self.dup(a, "MUL", [a, b])

    def div(self, a: Tensor, b: Tensor) -> Tensor:
        return self.dup(a, "DIV", [a, b])

    def sub(self, a: Tensor, b: Tensor) -> Tensor:
        return self.dup(a, "SUB", [a, b])

    def scale(self, a: Tensor) -> Tensor:
        return self.dup(a, "SCALE", [a])

    def clamp(self, a: Tensor) -> Tensor:
        return self.dup(a, "CLAMP", [a])

    def sqr(self, a: Tensor) -> Tensor:
        return self.dup(a, "SQR", [a])

    def sqrt(self, a: Tensor) -> Tensor:
        return self.dup(a, "SQRT", [a])

    def unary(self, a: Tensor) -> Tensor:
        """silu, gelu, tanh, relu, exp, sigmoid, softplus...: GGML_OP_UNARY."""
        return self.dup(a, "UNARY", [a])

    def rms_norm(self, a: Tensor) -> Tensor:
        return self.dup(a, "RMS_NORM", [a])

    def norm(self, a: Tensor) -> Tensor:
        return self.dup(a, "NORM", [a])

    def l2_norm(self, a: Tensor) -> Tensor:
        return self.dup(a, "L2_NORM", [a])

    def group_norm(self, a: Tensor) -> Tensor:
        return self.dup(a, "GROUP_NORM", [a])

    def rope(self, a: Tensor, pos: Tensor, factors: Tensor | None = None) -> Tensor:
        return self.dup(a, "ROPE", [a, pos, factors])

    def cont(self, a: Tensor, ne: tuple[int, ...] | None = None) -> Tensor:
        return self._op("CONT", a.type, a.ne if ne is None else ne, [a])

    def cpy(self, a: Tensor, b: Tensor) -> Tensor:
        """ggml_cpy(a, b): writes into b (a view of b)."""
        return self.view_tensor(b, "CPY", [a, b])

    def cast(self, a: Tensor, type_: GGMLType) -> Tensor:
        result = self._op("CPY", type_, a.ne, [a])
        return result

    def dup_op(self, a: Tensor) -> Tensor:
        return self.dup(a, "DUP", [a])

    def repeat(self, a: Tensor, ne: tuple[int, ...]) -> Tensor:
        return self._op("REPEAT", a.type, ne, [a])

    def concat(self, a: Tensor, b: Tensor, dim: int) -> Tensor:
        ne = list(a.ne)
        ne[dim] = a.ne[dim] + b.ne[dim]
        return self._op("CONCAT", a.type, tuple(ne), [a, b])

    def pad(self, a: Tensor, p0: int = 0, p1: int = 0, p2: int = 0, p3: int = 0) -> Tensor:
        return self._op("PAD", a.type, (a.ne[0] + p0, a.ne[1] + p1, a.ne[2] + p2, a.ne[3] + p3), [a])

    def soft_max_ext(self, a: Tensor, mask: Tensor | None, sinks: Tensor | None = None) -> Tensor:
        return self.dup(a, "SOFT_MAX", [a, mask, sinks])

    def glu_split(self, a: Tensor, b: Tensor) -> Tensor:
        """ggml_swiglu_split / geglu_split / reglu_split: GGML_OP_GLU with two inputs."""
        return self._op("GLU", a.type, a.ne, [a, b])

    def glu(self, a: Tensor) -> Tensor:
        """ggml_swiglu / ggml_geglu on a fused [2*n_ff] tensor: the result has half the rows."""
        return self._op("GLU", a.type, (a.ne[0] // 2, a.ne[1], a.ne[2], a.ne[3]), [a])

    def set_rows(self, dst: Tensor, values: Tensor, idxs: Tensor) -> Tensor:
        # ggml keeps the destination as src[2] ("order is weird due to legacy reasons")
        return self.view_tensor(dst, "SET_ROWS", [values, idxs, dst])

    def flash_attn_ext(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, sinks: Tensor | None = None
    ) -> Tensor:
        return self._op("FLASH_ATTN_EXT", F32, (v.ne[0], q.ne[2], q.ne[1], q.ne[3]), [q, k, v, mask, sinks])

    def argsort_top_k(self, a: Tensor, k: int) -> Tensor:
        """ggml_argsort_top_k: a full ARGSORT, then a view of its first k columns."""
        order = self._op("ARGSORT", I32, a.ne, [a])
        return self.view(order, (k, order.ne[1], order.ne[2], order.ne[3]), order.nb[1:], 0)

    def top_k(self, a: Tensor, k: int) -> Tensor:
        """ggml_top_k: the indices (I32) of each row's k largest values, a tensor of its own."""
        return self._op("TOP_K", I32, (k, a.ne[1], a.ne[2], a.ne[3]), [a])

    def fill(self, a: Tensor) -> Tensor:
        """ggml_fill: a new tensor shaped like `a`, every value set to one constant."""
        return self.dup(a, "FILL", [a])

    def lightning_indexer(self, q: Tensor, k: Tensor, weights: Tensor, mask: Tensor) -> Tensor:
        """ggml_lightning_indexer (sparse attention): one score per cached key and query token,
        [n_kv, n_tokens per stream, 1, n_stream]."""
        return self._op("LIGHTNING_INDEXER", F32, (k.ne[2], q.ne[2], 1, q.ne[3]), [q, k, weights, mask])

    def add_id(self, a: Tensor, b: Tensor, ids: Tensor) -> Tensor:
        return self.dup(a, "ADD_ID", [a, b, ids])

    def scale_inplace(self, a: Tensor) -> Tensor:
        """ggml_scale_inplace: the result is a view of `a`."""
        return self.view_tensor(a, "SCALE", [a])

    def sum_rows(self, a: Tensor) -> Tensor:
        return self._op("SUM_ROWS", a.type, (1, a.ne[1], a.ne[2], a.ne[3]), [a])

    def rwkv_wkv6(self, k: Tensor, v: Tensor, r: Tensor, tf: Tensor, td: Tensor, state: Tensor) -> Tensor:
        """ggml_rwkv_wkv6: the output rows, then the new state, in one [S*H, n_tokens + S*n_seqs] tensor."""
        s, h, n_tokens = k.ne[0], k.ne[1], k.ne[2]
        return self._op("RWKV_WKV6", F32, (s * h, n_tokens + s * state.ne[1]), [k, v, r, tf, td, state])

    def rwkv_wkv7(self, r: Tensor, w: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, state: Tensor) -> Tensor:
        """ggml_rwkv_wkv7: laid out as ggml_rwkv_wkv6."""
        s, h, n_tokens = k.ne[0], k.ne[1], k.ne[2]
        return self._op("RWKV_WKV7", F32, (s * h, n_tokens + s * state.ne[1]), [r, w, k, v, a, b, state])

    def gated_delta_net(
        self, q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor, n_snapshots: int = 1
    ) -> Tensor:
        """ggml_gated_delta_net: the output rows, then `n_snapshots` states per sequence."""
        s_v, h, n_tokens, n_seqs = v.ne
        rows = n_tokens * n_seqs + n_snapshots * s_v * n_seqs
        return self._op("GATED_DELTA_NET", F32, (s_v * h, rows), [q, k, v, g, beta, state])

    def op(self, op: str, type_: GGMLType, ne: tuple[int, ...], srcs: list[Tensor | None]) -> Tensor:
        """Any other op, given its result shape."""
        return self._op(op, type_, ne, srcs)

    # -- graph order -----------------------------------------------------------------------

    def expand(self, tensor: Tensor) -> None:
        """ggml_build_forward_expand: append tensor and its unvisited parents, depth first."""
        stack: list[tuple[Tensor, int]] = [(tensor, 0)]
        visited = self._visited
        if id(tensor) in visited:
            return
        visited.add(id(tensor))
        while stack:
            node, i = stack[-1]
            if i < len(node.src):
                stack[-1] = (node, i + 1)
                child = node.src[i]
                if id(child) not in visited:
                    visited.add(id(child))
                    stack.append((child, 0))
                continue
            stack.pop()
            if node.op == "NONE":
                self.leafs.append(node)
            else:
                self.nodes.append(node)


__all__ = ["F16", "F32", "FLAG_INPUT", "FLAG_OUTPUT", "I32", "I64", "Graph", "Tensor", "row_size"]

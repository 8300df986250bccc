"""A replay of ggml's backend scheduler (ggml-backend.cpp, `ggml_backend_sched_split_graph`).

With GPUs in play the graph is split across backends: ops run where their
weights live, GPU assignments spread to neighbouring ops, and large ops whose
weights sit in host memory are offloaded to the GPU (their weights copied into
the GPU's compute buffer). Every tensor a split reads from another backend is
copied into the split's backend. This module assigns each node a backend the
same way and rewrites the graph with those copies, so that the allocator replay
(`planner.ggml_alloc`) sizes one compute buffer per backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from planner.ggml_graph import FLAG_INPUT, FLAG_OUTPUT, Tensor
from planner.gpu_ops import supports_op, within_tensor_limit
from planner.op_support import OpTable
from planner.vk_graph_order import enabled as vulkan_reorders
from planner.vk_graph_order import vulkan_order

VIEW_OPS = frozenset({"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})
# ops excluded from "run where the weights are" (ggml_backend_sched_backend_id_from_cur)
_NO_WEIGHT_PULL = frozenset({"ROPE", "FLASH_ATTN_EXT"})


@dataclass(frozen=True)
class SchedBackend:
    """One backend as the scheduler sees it, in priority order (GPUs first, the CPU last)."""

    name: str
    is_cpu: bool
    device: int  # index of the GPU, or -1 for the CPU
    # CUDA/ROCm: minimum batch for offloading an op whose weights are in host memory
    offload_min_batch: int = 32
    supports_offload: bool = True
    kind: str = ""  # cuda, rocm, metal, vulkan; "" for the CPU
    max_tensor: int | None = None  # the device's largest tensor (Device.max_tensor_bytes)
    # what the device answered for the model's ops (planner.op_support); None: the backend's rules decide
    ops: OpTable | None = field(default=None, compare=False)
    # ops taken to run here whatever the device answered (the counterfactual that prices an op on the CPU)
    run_anyway: frozenset[str] = frozenset()

    def supports(self, node: Tensor, extents: frozenset[int] = frozenset()) -> bool:
        """ggml_backend_supports_op: the CPU runs everything; a GPU refuses an op over its largest tensor, else
        answers as the device answered for the op (or its family, in a graph of these extents), else as
        planner.gpu_ops says."""
        if self.is_cpu:
            return True
        if not within_tensor_limit(node, self.max_tensor):
            return False
        if node.op in self.run_anyway:
            return True
        if self.ops is not None:
            answer = self.ops.answer(node, extents)
            if answer is not None:
                return answer
        return supports_op(self.kind, node)


def op_batch_size(node: Tensor) -> int:
    """get_op_batch_size in ggml-cuda."""
    if node.op == "GET_ROWS":
        return 0
    if node.op == "MUL_MAT":
        return node.ne[1]
    if node.op in ("MUL_MAT_ID", "ROPE"):
        return node.ne[2]
    return node.ne[1] * node.ne[2] * node.ne[3]


@dataclass
class ScheduledGraph:
    """A graph after ggml_backend_sched: each node's backend, the splits and the copies between them."""

    nodes: list[Tensor]
    leafs: list[Tensor]
    node_backend: list[str]
    leaf_backend: list[str]
    n_splits: int
    copies: list[Tensor] = field(default_factory=list)
    # (op, device) -> nodes on the CPU because that GPU refused them where it would have run them
    refused: dict[tuple[str, str], int] = field(default_factory=dict)


def _use_counts(nodes: list[Tensor]) -> dict[int, int]:
    """How many sources of the graph's nodes are each tensor (by id)."""
    uses: dict[int, int] = {}
    for node in nodes:
        for src in node.src:
            uses[id(src)] = uses.get(id(src), 0) + 1
    return uses


def _get(t: Tensor) -> int:
    return t.s_backend


def _base(t: Tensor) -> Tensor:
    return t.view_src if t.view_src is not None else t


class Scheduler:
    def __init__(self, backends: list[SchedBackend], op_offload: bool = True, n_copies: int = 1) -> None:
        self.backends = backends
        self.cpu = len(backends) - 1
        self.op_offload = op_offload
        # pipeline parallelism (several GPUs, full offload): inputs are kept in n_copies copies
        self.n_copies = n_copies
        # per split: each (backend, node)'s answer, and the nodes a GPU refused where it would have run them
        self._answers: dict[tuple[int, int], bool] = {}
        self._refused: dict[int, tuple[Tensor, int]] = {}
        self._extents: frozenset[int] = frozenset()

    def _supports(self, b: int, node: Tensor) -> bool:
        key = (b, id(node))
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self.backends[b].supports(node, self._extents)
        return answer

    def _supports_or_refuses(self, b: int, node: Tensor) -> bool:
        """Whether GPU b runs a node it would take; a refusal is remembered (the plan names such ops)."""
        ok = self._supports(b, node)
        if not ok and b != self.cpu:
            self._refused.setdefault(id(node), (node, b))
        return ok

    # -- helpers -----------------------------------------------------------------------------

    def _buffer_backend(self, t: Tensor) -> int | None:
        """The backend whose buffer a pre-allocated tensor (weight, cache) lives in."""
        base = t.view_src if t.view_src is not None else t
        if not base.external:
            return None
        location = base.backend
        if location is None or location == "host":
            return self.cpu
        for i, b in enumerate(self.backends):
            if b.name == location:
                return i
        return self.cpu

    def _supports_buffer_of(self, b: int, owner: int) -> bool:
        """Whether backend b can read a buffer that belongs to backend `owner`.

        GPUs read only their own buffers; the CPU reads every host buffer.
        """
        return b == owner

    def _buffer_supported(self, t: Tensor, b: int) -> bool:
        owner = self._buffer_backend(t)
        if owner is None:
            owner = t.s_backend
            if owner == -1 and t.view_src is not None:
                owner = t.view_src.s_backend
            if owner == -1:
                return False
        return self._supports_buffer_of(b, owner)

    def _from_cur(self, t: Tensor) -> int:
        owner = self._buffer_backend(t)
        if owner is not None:
            return owner
        if t.flags & FLAG_INPUT:
            return self.cpu
        if t.op not in _NO_WEIGHT_PULL:
            for src in t.src:
                if src.external and src.weight:
                    src_backend = self._buffer_backend(src)
                    assert src_backend is not None
                    if self.op_offload and src_backend == self.cpu and src.host_plain:
                        for b in range(self.cpu):
                            backend = self.backends[b]
                            if (
                                backend.supports_offload
                                and self._supports(b, t)
                                and op_batch_size(t) >= backend.offload_min_batch
                            ):
                                return b
                    # ggml_backend_sched_backend_from_buffer: the weight's backend only where it runs the op
                    # (a GPU reads no other buffer: the node is left to the later passes)
                    if src_backend != self.cpu and not self._supports_or_refuses(src_backend, t):
                        return -1
                    return src_backend
        return -1

    # -- the passes --------------------------------------------------------------------------

    def split(
        self,
        nodes: list[Tensor],
        leafs: list[Tensor],
        pinned: Callable[[Tensor], int | None],
        extents: frozenset[int] = frozenset(),
    ) -> ScheduledGraph:
        """ggml_backend_sched_split_graph: assign every node a backend, then cut the graph into splits
        and copy each split's inputs into its backend. The passes are llama.cpp's, in its order. `extents`:
        the graph's tokens, outputs and cache cells (planner.op_support.graph_extents)."""
        self._answers, self._refused, self._extents = {}, {}, extents
        if len(self.backends) == 1:
            return self._one_backend(nodes, leafs)
        self._reset(nodes, leafs)
        self._pin(nodes, pinned)
        self._pass1_where_the_weights_are(nodes, leafs)
        compute_nodes = [n for n in nodes if n.op not in VIEW_OPS]
        self._pass2_expand(compute_nodes)
        self._pass3_most_supported_inputs(compute_nodes)
        self._pass4_sources_follow(nodes)
        out_nodes, out_backend, n_splits, new_src, all_copies, segments = self._pass5_splits_and_copies(nodes)
        # ggml's use counts are the built graph's: counted before the copies take the place of split inputs
        uses = _use_counts(nodes) if any(b.kind == "vulkan" for b in self.backends) else {}
        final_nodes = self._with_rewritten_sources(out_nodes, new_src)
        final_nodes, out_backend = self._backend_orders(uses, out_nodes, final_nodes, out_backend, segments)
        out_leafs = self._leafs_with_copies(leafs, all_copies)
        cpu = self.cpu
        leaf_backend = [self.backends[t.s_backend if t.s_backend != -1 else cpu].name for t in out_leafs]
        refused: dict[tuple[str, str], int] = {}
        for node, b in self._refused.values():
            if node.s_backend == cpu:
                key = (node.op, self.backends[b].name)
                refused[key] = refused.get(key, 0) + 1
        return ScheduledGraph(final_nodes, out_leafs, out_backend, leaf_backend, n_splits, all_copies, refused)

    def _one_backend(self, nodes: list[Tensor], leafs: list[Tensor]) -> ScheduledGraph:
        """What the passes come to with the CPU alone (a plan without GPUs, the most common one): every node and
        leaf on it, one split, nothing copied or refused, the graph's order kept; without walking the graph
        five times."""
        name = self.backends[0].name
        return ScheduledGraph(list(nodes), list(leafs), [name] * len(nodes), [name] * len(leafs), 1, [], {})

    @staticmethod
    def _reset(nodes: list[Tensor], leafs: list[Tensor]) -> None:
        for group in (leafs, nodes):
            for t in group:
                t.s_backend = -1
                for src in t.src:
                    src.s_backend = -1
                    if src.view_src is not None:
                        src.view_src.s_backend = -1
                if t.view_src is not None:
                    t.view_src.s_backend = -1

    @staticmethod
    def _pin(nodes: list[Tensor], pinned: Callable[[Tensor], int | None]) -> None:
        """User assignments: llama.cpp's graph callback pins some norms to their layer's device."""
        for node in nodes:
            pin = pinned(node)
            if pin is not None:
                node.s_backend = pin

    def _pass1_where_the_weights_are(self, nodes: list[Tensor], leafs: list[Tensor]) -> None:
        # pass 1
        for leaf in leafs:
            if _get(leaf) == -1:
                leaf.s_backend = self._from_cur(leaf)
        for node in nodes:
            if _get(node) == -1:
                node.s_backend = self._from_cur(node)

    def _pass2_expand(self, compute_nodes: list[Tensor]) -> None:
        cpu = self.cpu

        # pass 2: expand GPU assignments down and up, then any assignment down and up
        def expand(order: list[Tensor], skip_cpu: bool) -> None:
            cur = -1
            for node in order:
                b = _get(node)
                if b != -1:
                    cur = -1 if (skip_cpu and b == cpu) else b
                elif cur != -1 and self._supports_or_refuses(cur, node):
                    node.s_backend = cur

        expand(compute_nodes, True)
        expand(list(reversed(compute_nodes)), True)
        expand(compute_nodes, False)
        expand(list(reversed(compute_nodes)), False)

    def _pass3_most_supported_inputs(self, compute_nodes: list[Tensor]) -> None:
        # pass 3: unassigned nodes go to the backend that can read most of their inputs
        for node in compute_nodes:
            if _get(node) != -1:
                continue
            best, best_n = -1, -1
            for b in range(len(self.backends)):
                if not self._supports(b, node):
                    continue
                n = sum(
                    1
                    for s in node.src
                    if (_get(s) != -1 or (s.view_src is not None and _get(s.view_src) != -1))
                    and self._buffer_supported(s, b)
                )
                if n > best_n:
                    best, best_n = b, n
            node.s_backend = best

    def _view_source_backend(self, view_src: Tensor) -> int:
        """Where a view follows its source: the buffer's backend of a pre-allocated one, else the source's."""
        owner = self._buffer_backend(view_src)
        return owner if owner is not None else _get(view_src)

    def _pass4_sources_follow(self, nodes: list[Tensor]) -> None:
        # pass 4: sources and views follow their consumers and their view sources
        for node in nodes:
            if node.view_src is not None and _get(node) == -1:
                node.s_backend = self._view_source_backend(node.view_src)
            for src in node.src:
                if _get(src) == -1:
                    if src.view_src is not None:
                        src.s_backend = self._view_source_backend(src.view_src)
                    else:
                        src.s_backend = _get(node)
            if _get(node) == -1:
                node.s_backend = 0

    def _pass5_splits_and_copies(
        self, nodes: list[Tensor]
    ) -> tuple[list[Tensor], list[str], int, dict[int, list[Tensor]], list[Tensor], list[tuple[int, int, int]]]:
        cpu = self.cpu
        # each split's own nodes in out_nodes (after its input copies): start, end, backend
        segments: list[tuple[int, int, int]] = []
        # pass 5: splits and input copies
        copies: dict[tuple[int, int], Tensor] = {}
        out_nodes: list[Tensor] = []
        out_backend: list[str] = []
        n_splits = 0
        cur = -1
        pending: list[tuple[Tensor, Tensor, int]] = []  # (source, copy, backend) added at the split start
        split_start = 0
        new_src: dict[int, list[Tensor]] = {}
        all_copies: list[Tensor] = []

        first = next((n for n in nodes if n.op not in VIEW_OPS), None)
        cur = _get(first) if first is not None else cpu
        n_splits = 1
        split_inputs = 0
        for node in nodes:
            if node.op in VIEW_OPS:
                out_nodes.append(node)
                out_backend.append(self.backends[_get(node) if _get(node) != -1 else cur].name)
                continue
            b = _get(node)
            need_new = False
            if b == cur and split_inputs > 0:
                for src in node.src:
                    if src.external and src.weight:
                        sb = _get(src)
                        if sb != cur and not self._buffer_supported(src, cur):
                            need_new = True
                            break
            if b != cur or need_new:
                # flush copies gathered for the previous split at its start
                self._insert_copies(out_nodes, out_backend, split_start, pending)
                segments.append((split_start + 2 * len(pending), len(out_nodes), cur))
                pending = []
                split_start = len(out_nodes)
                n_splits += 1
                cur = b
                split_inputs = 0
            srcs = list(node.src)
            for j, src in enumerate(srcs):
                sb = _get(src)
                if sb != cur and not self._buffer_supported(src, cur):
                    key = (id(src), cur)
                    copy = copies.get(key)
                    if copy is None:
                        copy = Tensor(src.type, src.ne, src.nb, name=f"{self.backends[cur].name}#{src.name}")
                        copies[key] = copy
                        copy.s_backend = cur
                        if self.n_copies > 1:
                            copy.flags |= FLAG_INPUT | FLAG_OUTPUT
                        pending.append((src, copy, cur))
                        all_copies.append(copy)
                        split_inputs += 1
                    srcs[j] = copy
            if srcs != node.src:
                new_src[id(node)] = srcs
            out_nodes.append(node)
            out_backend.append(self.backends[b].name)
        self._insert_copies(out_nodes, out_backend, split_start, pending)
        segments.append((split_start + 2 * len(pending), len(out_nodes), cur))

        return out_nodes, out_backend, n_splits, new_src, all_copies, segments

    def _backend_orders(
        self,
        uses: dict[int, int],
        out_nodes: list[Tensor],
        final_nodes: list[Tensor],
        out_backend: list[str],
        segments: list[tuple[int, int, int]],
    ) -> tuple[list[Tensor], list[str]]:
        """Each split as its backend's graph_optimize leaves it (ggml-backend.cpp:1478), with the tensors the
        backend keeps alive held by a NONE node after the node they must outlive (ggml-backend.cpp:1542).
        Only ggml-vulkan reorders (planner.vk_graph_order); the other backends keep the graph's order."""
        vulkan = [seg for seg in segments if seg[2] != self.cpu and self.backends[seg[2]].kind == "vulkan"]
        if not vulkan or not vulkan_reorders():
            return final_nodes, out_backend
        # each node's uses in the graph as built (ggml_graph's use_counts), for the node or the clone that reads
        # a split's input copies in its place
        use_count = {id(f): uses.get(id(o), 0) for o, f in zip(out_nodes, final_nodes)}
        new_nodes: list[Tensor] = []
        new_backend: list[str] = []
        at = 0
        for start, end, b in vulkan:
            new_nodes += final_nodes[at:start]
            new_backend += out_backend[at:start]
            order, deps = vulkan_order(final_nodes[start:end], use_count)
            for i in order:
                node = final_nodes[start + i]
                new_nodes.append(node)
                new_backend.append(out_backend[start + i])
                keep = deps.get(id(node), [])
                for k in range(0, len(keep), 10):  # GGML_MAX_SRC sources per dependency node
                    first = keep[k]
                    dep = Tensor(first.type, first.ne, first.nb, "NONE", keep[k : k + 10], view_src=_base(first))
                    new_nodes.append(dep)
                    new_backend.append(self.backends[b].name)
            at = end
        new_nodes += final_nodes[at:]
        new_backend += out_backend[at:]
        return new_nodes, new_backend

    @staticmethod
    def _with_rewritten_sources(out_nodes: list[Tensor], new_src: dict[int, list[Tensor]]) -> list[Tensor]:
        # apply the rewritten sources on shallow clones, leaving the built graph untouched
        rewritten: dict[int, Tensor] = {}
        final_nodes: list[Tensor] = []
        for node in out_nodes:
            srcs = new_src.get(id(node))
            if srcs is None:
                final_nodes.append(node)
                continue
            clone = Tensor(
                node.type,
                node.ne,
                node.nb,
                node.op,
                srcs,
                node.view_src,
                node.view_offs,
                node.flags,
                node.external,
                node.name,
                node.backend,
            )
            rewritten[id(node)] = clone
            final_nodes.append(clone)
        if rewritten:
            for node in final_nodes:
                if node.src and any(id(s) in rewritten for s in node.src):
                    node.src = [rewritten.get(id(s), s) for s in node.src]
                if node.view_src is not None and id(node.view_src) in rewritten:
                    node.view_src = rewritten[id(node.view_src)]

        return final_nodes

    def _leafs_with_copies(self, leafs: list[Tensor], all_copies: list[Tensor]) -> list[Tensor]:
        out_leafs: list[Tensor] = []
        if self.n_copies > 1:
            # inputs and split-input copies, n_copies of each, allocated first and never freed
            for leaf in leafs:
                if not leaf.flags & FLAG_INPUT:
                    continue
                leaf.flags |= FLAG_OUTPUT
                out_leafs.append(leaf)
                for _ in range(self.n_copies - 1):
                    extra = Tensor(leaf.type, leaf.ne, leaf.nb, flags=FLAG_INPUT | FLAG_OUTPUT, name=leaf.name + "#c")
                    extra.s_backend = _get(leaf)
                    out_leafs.append(extra)
            for copy in all_copies:
                out_leafs.append(copy)
                for _ in range(self.n_copies - 1):
                    extra = Tensor(copy.type, copy.ne, copy.nb, flags=FLAG_INPUT | FLAG_OUTPUT, name=copy.name + "#c")
                    extra.s_backend = copy.s_backend
                    out_leafs.append(extra)
        out_leafs.extend(leafs)
        return out_leafs

    def _insert_copies(
        self, out_nodes: list[Tensor], out_backend: list[str], at: int, pending: list[tuple[Tensor, Tensor, int]]
    ) -> None:
        """Put each input copy, preceded by a dependency on its source, at the split's start."""
        inserted: list[tuple[Tensor, str]] = []
        for src, copy, b in pending:
            dep = Tensor(src.type, src.ne, src.nb, "NONE", [src], view_src=src.view_src or src, name="dep")
            src_backend = out_backend[out_nodes.index(src)] if src in out_nodes else self.backends[self.cpu].name
            inserted.append((dep, src_backend))
            inserted.append((copy, self.backends[b].name))
        for offset, (tensor, backend) in enumerate(inserted):
            out_nodes.insert(at + offset, tensor)
            out_backend.insert(at + offset, backend)


__all__ = ["FLAG_OUTPUT", "SchedBackend", "ScheduledGraph", "Scheduler", "op_batch_size"]

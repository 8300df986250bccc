"""Which ops a device runs, as the device itself answered: the support table the scheduler replay places nodes by.

llama.cpp's scheduler puts each node on the first backend whose `supports_op` accepts it; a node no GPU accepts
runs on the CPU with its inputs and outputs copied across, one more graph split each way (ggml-backend.cpp,
ggml_backend_sched_split_graph). What a backend accepts depends on its build and on the device: ggml-vulkan has
a LIGHTNING_INDEXER kernel for heads of 128 values only, and only on devices with fp16; a real card's driver and
lavapipe differ. So the planner does not guess per backend name where it can be told: the app's device probe
builds the nodes of a model's reserve graphs in ggml, at their shapes, and asks each device
(`ggml_backend_dev_supports_op`, app.devices.op_probe). The answers come here as data, an `OpTable` per device.

A node is looked up by everything a backend's supports_op reads of it (`op_key`): its op and op parameter, and
the type, shape, strides and view offset of the node and of each source by ggml's source slot. The probe asks at
the shapes of a few configurations; a node of another configuration (another context, micro-batch) is answered
by its family (`family_key`: the same op on the same types, row lengths, layout and weights) where every asked
member of the family got the same answer; otherwise the planner's own rules for the backend decide
(planner.gpu_ops), as they do for a device nobody could ask (a what-if card).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.ggml_types import TYPES_BY_ID

if TYPE_CHECKING:
    from planner.ggml_graph import Tensor

# ops that only view their source (never asked: every backend takes them) and graph leaves
NOT_ASKED = frozenset({"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})
# the op parameter a backend reads for these ops, from the activation the graph builder recorded (Tensor.act):
# ggml's unary op of a UNARY node and glu op of a GLU node; an op without one is asked with zeroed parameters
UNARY_OF_ACT = {"silu": "SILU", "gelu": "GELU", "relu": "RELU"}
GLU_OF_ACT = {"silu": "SWIGLU", "gelu": "GEGLU", "relu": "REGLU"}

# one tensor as supports_op reads it: ggml type id, ne, nb, view offset (-1: not a view)
TensorKey = tuple[int, tuple[int, int, int, int], tuple[int, int, int, int], int]
# an op: its name, its op parameter's name ("" where none is set), the result, the sources by ggml slot
OpKey = tuple[str, str, TensorKey, tuple["TensorKey | None", ...]]


def tensor_key(t: Tensor) -> TensorKey:
    return (t.type.id, t.ne, t.nb, t.view_offs if t.view_src is not None else -1)


def op_param(node: Tensor) -> str:
    if node.op == "UNARY":
        return UNARY_OF_ACT.get(node.act, "")
    if node.op == "GLU":
        return GLU_OF_ACT.get(node.act, "")
    return ""


def op_key(node: Tensor) -> OpKey:
    """The node as a backend's supports_op reads it."""
    n_slots = (max(node.src_slots) + 1) if node.src_slots else len(node.src)
    sources: list[TensorKey | None] = []
    for slot in range(n_slots):
        src = node.source(slot)
        sources.append(tensor_key(src) if src is not None else None)
    return (node.op, op_param(node), tensor_key(node), tuple(sources))


def _layout(t: TensorKey) -> tuple[bool, ...]:
    """What a tensor's strides say beyond its extents: rows packed, planes packed, 16-byte strides, unit dims."""
    type_id, ne, nb, offs = t
    ggml = TYPES_BY_ID.get(type_id)
    row = ggml.row_bytes(ne[0]) if ggml is not None else nb[1]
    return (
        nb[0] == (ggml.type_size if ggml is not None else nb[0]),
        nb[1] == row,
        nb[2] == nb[1] * ne[1],
        nb[3] == nb[2] * ne[2],
        all(n % 16 == 0 for n in nb[1:]),
        ne[1] == 1,
        ne[2] == 1,
        ne[3] == 1,
        offs >= 0,
        offs % 256 == 0 if offs >= 0 else True,
    )


# a dimension that equals one of the graph's extents (tokens, outputs, cache cells), in a family key
EXTENT = -1
Family = tuple[object, ...]


def graph_extents(*sizes: int) -> frozenset[int]:
    """The extents of one reserve graph that change with the configuration: its tokens, outputs, cache cells,
    streams and tokens per stream (sizes of 1 and 0 are left out: every tensor has dimensions of 1)."""
    return frozenset(n for n in sizes if n > 1)


def family_key(key: OpKey, extents: frozenset[int]) -> Family:
    """The op with each dimension equal to one of its graph's `extents` made EXTENT, and strides reduced to the
    layout they describe: the same op of the same model at another context or micro-batch has the same family."""
    op, param, dst, sources = key

    def of(t: TensorKey | None) -> object:
        if t is None:
            return None
        return (t[0], tuple(EXTENT if n in extents else n for n in t[1]), _layout(t))

    return (op, param, of(dst), tuple(of(s) for s in sources))


def families(
    asked: Mapping[OpKey, Iterable[frozenset[int]]], answers: Mapping[OpKey, bool]
) -> dict[Family, bool | None]:
    """Each family's answer, from the asked ops (each with the extents of every graph it was found in): None where
    the family's members were answered differently (then only an asked op itself is answered)."""
    out: dict[Family, bool | None] = {}
    for key, extents in asked.items():
        answer = answers.get(key)
        if answer is None:
            continue
        for found_in in extents:
            family = family_key(key, found_in)
            known = out.get(family, answer)
            out[family] = answer if known == answer else None
    return out


def key_nbytes(t: TensorKey) -> int:
    """ggml_nbytes of a tensor key."""
    type_id, ne, nb, _ = t
    if any(n <= 0 for n in ne):
        return 0
    ggml = TYPES_BY_ID.get(type_id)
    block = ggml.block_size if ggml is not None else 1
    size = ne[0] * nb[0] // block
    for n, b in zip(ne[1:], nb[1:]):
        size += (n - 1) * b
    return size


def largest_tensor(key: OpKey) -> int:
    """The largest tensor the op touches (a device refuses ops over its largest tensor whatever the op)."""
    _, _, dst, sources = key
    return max(key_nbytes(t) for t in (dst, *sources) if t is not None)


@dataclass(frozen=True)
class OpTable:
    """One device's answers for one model's ops (ggml_backend_dev_supports_op): each asked op's, and each
    family's (planner.op_support.families)."""

    answers: Mapping[OpKey, bool]
    by_family: Mapping[Family, bool | None] = field(default_factory=dict)
    _digest: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def answer(self, node: Tensor, extents: frozenset[int] = frozenset()) -> bool | None:
        """The device's answer for this node of a graph with these extents, or None where neither the node nor
        its family was asked (or the family's members were answered differently)."""
        key = op_key(node)
        found = self.answers.get(key)
        if found is not None:
            return found
        return self.by_family.get(family_key(key, extents))

    @property
    def digest(self) -> str:
        """Names the table in the compute memo's keys (the answers decide the compute buffers)."""
        if not self._digest:
            text = repr((sorted(self.answers.items()), sorted(self.by_family.items(), key=repr)))
            self._digest.append(hashlib.sha1(text.encode()).hexdigest())
        return self._digest[0]


@dataclass(frozen=True)
class OpsOnCpu:
    """The model's ops that run on the CPU because a device of the plan refused them where it holds their layers,
    and what that costs against the devices running them (the same plan priced with those ops on the devices)."""

    ops: tuple[tuple[str, str, int], ...]  # (op, the device that refused it, nodes of the prompt graph)
    splits: int  # graph splits of the prompt graph (each one a hand-over between devices)
    splits_on_device: int  # ... were the devices to run the ops
    host_compute: int  # bytes the host's compute buffer takes more (negative: less)
    device_compute: tuple[tuple[str, int], ...]  # per device: bytes its compute buffer takes more (negative: less)


__all__ = [
    "EXTENT",
    "NOT_ASKED",
    "Family",
    "OpKey",
    "OpTable",
    "OpsOnCpu",
    "families",
    "family_key",
    "graph_extents",
    "largest_tensor",
    "op_key",
]

"""Compute-buffer sizes remembered by what determines them.

Pricing one configuration's compute buffers means building llama.cpp's reserve graphs and
replaying ggml's allocator over them: most of a plan's time. The sizes depend only on the
model (its tensors and hyper-parameters), the resolved configuration, where the layers and
weights are, the devices' names and backends, and the planner's own rules; never on free
memory. So the solver's repeated candidates, the elastic plan and later runs can share them.

Nothing is kept unless the caller installs a `SizeStore` (the app keeps one on disk, keyed
by the planner's code as well, so an edited rule prices again): a library user, or a test
that changes a rule at run time, always gets a fresh price.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from planner.config import Resolved
    from planner.hardware import Device
    from planner.model import ModelAnatomy
    from planner.weights import LayerPlacement, WeightBuffers


class SizeStore(Protocol):
    def get(self, key: str) -> dict[str, int] | None: ...

    def put(self, key: str, sizes: dict[str, int]) -> None: ...


# id(model) -> (a weak reference to it, its digest); anatomies are unhashable dataclasses
_digests: dict[int, tuple[weakref.ref[ModelAnatomy], str]] = {}
_store: SizeStore | None = None


def use_store(store: SizeStore | None) -> None:
    """Keep sizes in `store` from now on (None: keep nothing)."""
    global _store
    _store = store


def model_digest(model: ModelAnatomy) -> str:
    """A digest of everything the planner knows of the model; computed once per anatomy."""
    known = _digests.get(id(model))
    if known is not None and known[0]() is model:
        return known[1]
    import hashlib  # here, not at the top: the app installs a store on every start, prices on few
    import pickle

    digest = hashlib.sha1(pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()
    key = id(model)
    _digests[key] = (weakref.ref(model, lambda _ref: _digests.pop(key, None)), digest)
    return digest


def size_key(
    model: ModelAnatomy,
    r: Resolved,
    placement: LayerPlacement,
    gpus: list[Device],
    weights: WeightBuffers,
    op_offload: bool,
    run_anyway: frozenset[str] = frozenset(),
) -> str:
    parts = (
        model_digest(model),
        repr(r),
        repr(placement),
        tuple(
            (
                d.name,
                d.backend,
                d.buffer_alignment,
                d.host_buffer,
                d.host_alignment,
                d.max_tensor_bytes,
                d.op_support.digest if d.op_support is not None else "",
            )
            for d in gpus
        ),
        sorted(weights.tensor_device.items()),
        weights.output_copy,
        sorted(weights.repacked),
        op_offload,
        sorted(run_anyway),
    )
    import hashlib

    return hashlib.sha1(repr(parts).encode()).hexdigest()


def remembered(key: str, price: Callable[[], dict[str, int]]) -> dict[str, int]:
    """The sizes under `key` from the store, or priced now (and then stored)."""
    if _store is None:
        return price()
    sizes = _store.get(key)
    if sizes is None:
        sizes = price()
        _store.put(key, sizes)
    return dict(sizes)


def active() -> bool:
    return _store is not None

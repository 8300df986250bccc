"""The projector's compute buffer: clip's graphs, scheduled and replayed through ggml's allocator.

clip.cpp's warmup builds the encoder graph for one image of the warmup size and
reserves it on a scheduler of its own (the projector's device first, the CPU
last); `ggml_backend_sched_reserve` sizes one compute buffer per backend, the peak
of ggml's graph allocator over that graph. Encoding a larger image later grows
each buffer to that image's graph (ggml's allocator never shrinks one): for the
projectors with dynamic resolution the warmup image is smaller than the largest
image they accept, so the buffer a chat ends up holding is the larger of the two.
"""

from __future__ import annotations

from planner.backends import CPU, BackendRules
from planner.ggml_alloc import BufferType, reserve
from planner.projector import Projector
from planner.projectors import rule_for
from planner.projectors.clip import ClipGraph
from planner.scheduler import SchedBackend, Scheduler
from planner.units import HOST_BUFFER


def warmup_image(p: Projector) -> tuple[int, int]:
    rule = rule_for(p.projector_type)
    if rule is None:
        raise ValueError(f"no graph for projector type {p.projector_type!r}")
    return rule.warmup_image(p)


def largest_images(p: Projector, image_max_tokens: int | None = None) -> list[tuple[int, int]]:
    """The images (nx, ny) that need the most compute: the warmup image for fixed-size encoders,
    else images of the most tokens the preprocessor lets through (`image_max_tokens` as
    llama-server's --image-max-tokens; None: the model's limit)."""
    rule = rule_for(p.projector_type)
    if rule is None:
        raise ValueError(f"no graph for projector type {p.projector_type!r}")
    if rule.largest_images is None:
        return [rule.warmup_image(p)]
    return rule.largest_images(p, image_max_tokens or rule.max_tokens)


def build_graph(
    p: Projector, flash_attn: bool, image: tuple[int, int] | None = None, backend: str = "host"
) -> ClipGraph:
    """The encoder graph for `image` (nx, ny; default the warmup image), weights on `backend`."""
    rule = rule_for(p.projector_type)
    if rule is None:
        raise ValueError(f"no graph for projector type {p.projector_type!r}")
    nx, ny = image or rule.warmup_image(p)
    c = ClipGraph(p, nx, ny, flash_attn, weight_backend=backend)
    c.g.expand(rule.build(c))
    return c


def compute_buffers(
    p: Projector,
    flash_attn: bool,
    image: tuple[int, int] | None = None,
    gpu: tuple[str, str, BackendRules] | None = None,
) -> dict[str, int]:
    """Bytes of clip's compute buffer per backend: {"CPU": n} on the host, or the GPU's and the CPU's
    when `gpu` (name, kind, rules) holds the projector."""
    backends = [SchedBackend(HOST_BUFFER, True, -1)]
    buffer_types = {HOST_BUFFER: BufferType(HOST_BUFFER, CPU.alignment, lambda t: t.nbytes())}
    where = "host"
    if gpu is not None:
        name, kind, rules = gpu
        backends.insert(0, SchedBackend(name, False, 0, kind=kind))
        buffer_types = {
            name: BufferType(name, rules.alignment, lambda t: rules.alloc_size(t.type, t.nbytes(), t.ne[0])),
            **buffer_types,
        }
        where = name
    c = build_graph(p, flash_attn, image, where)
    sg = Scheduler(backends).split(c.g.nodes, c.g.leafs, lambda t: None)
    nb, lb = sg.node_backend, sg.leaf_backend
    return reserve([(sg.nodes, sg.leafs)], buffer_types, lambda i, t: nb[i], lambda i, t: lb[i])


def peak_compute(
    p: Projector,
    flash_attn: bool,
    gpu: tuple[str, str, BackendRules] | None = None,
    image_max_tokens: int | None = None,
) -> dict[str, int]:
    """Each compute buffer after the warmup and the largest image: the larger of their graphs'."""
    sizes = compute_buffers(p, flash_attn, gpu=gpu)
    for image in largest_images(p, image_max_tokens):
        if image != warmup_image(p):
            for name, size in compute_buffers(p, flash_attn, image, gpu).items():
                sizes[name] = max(sizes[name], size)
    return sizes

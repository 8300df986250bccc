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
from planner.gguf import TensorInfo
from planner.projector import Projector
from planner.projectors import rule_for
from planner.projectors.clip import ClipGraph
from planner.scheduler import SchedBackend, Scheduler
from planner.units import HOST_BUFFER

# an audio encoder's compute buffer is not modelled: a flat allowance, named as an estimate
AUDIO_COMPUTE_ALLOWANCE = 64 * 1024 * 1024


def has_vision_graph(p: Projector) -> bool:
    """Whether the planner builds this projector's vision graph (a rule in planner.projectors)."""
    return p.has_vision and rule_for(p.projector_type) is not None


def is_exact(p: Projector) -> bool:
    """Whether the whole compute is exact: a vision graph the planner builds, and no audio encoder
    (libmtmd loads one beside it, with its own buffers, whose graph is not modelled)."""
    return has_vision_graph(p) and not p.has_audio


def loaded_tensors(p: Projector) -> list[TensorInfo]:
    """The tensors clip.cpp loads into its weight buffer (it reads some scalars and leaves them out)."""
    rule = rule_for(p.projector_type)
    skip = rule.unloaded if rule is not None else None
    return [t for t in p.tensors if not (skip and skip(t.name))]


def weight_bytes(p: Projector) -> int:
    return sum(t.n_bytes for t in loaded_tensors(p))


def projector_compute(p: Projector, flash_attn: bool, gpu: tuple[str, str, BackendRules] | None = None) -> int:
    """The compute buffer on the projector's device once it has encoded its largest image (clip's
    warmup reserves less for the encoders of dynamic resolution): exact when `is_exact`, else
    `compute_estimate`. `gpu` is (name, backend kind, BackendRules) of the GPU holding the projector,
    None on the host."""
    if not has_vision_graph(p):
        return compute_estimate(p, flash_attn)
    audio = AUDIO_COMPUTE_ALLOWANCE if p.has_audio else 0
    # the solver plans many configurations with one projector: replay each of its graphs once
    key = (_identity(p), p.image_max_tokens, flash_attn, gpu[:2] if gpu else None, gpu[2] if gpu else None)
    cached = _COMPUTE_CACHE.get(key)
    if cached is None:
        sizes = peak_compute(p, flash_attn, gpu=gpu, image_max_tokens=p.image_max_tokens)
        cached = sizes[gpu[0]] if gpu else sizes["CPU"]
        if len(_COMPUTE_CACHE) > 256:
            _COMPUTE_CACHE.clear()
        _COMPUTE_CACHE[key] = cached
    return cached + audio


_COMPUTE_CACHE: dict[tuple[object, ...], int] = {}


def _identity(p: Projector) -> tuple[object, ...]:
    """What the compute buffer depends on: the file, its shapes and the metadata clip.cpp reads."""
    md = tuple(sorted((k, repr(v)) for k, v in p.metadata.items() if not k.startswith("general.")))
    return (p.path, p.projector_type, len(p.tensors), sum(t.n_bytes for t in p.tensors), md)


def compute_estimate(p: Projector, flash_attn: bool) -> int:
    """Peak activations of one encoder pass over the largest image (an estimate).

    The residual stream, the MLP intermediate and, without flash attention, the
    attention matrix [n_patches, n_patches, n_head] in F32 dominate a ViT's graph.
    """
    n = p.n_patches
    if n == 0:
        return AUDIO_COMPUTE_ALLOWANCE  # audio encoders and unknown shapes: a flat allowance
    hidden = n * p.n_embd * 4
    mlp = n * max(p.n_ff, p.n_embd) * 4
    attn = 0 if flash_attn else n * n * max(p.n_head, 1) * 4
    return 3 * hidden + max(2 * mlp, attn + hidden)


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


def largest_image_pixels(p: Projector, image_max_tokens: int | None = None) -> int | None:
    """The most pixels an image keeps through clip's preprocessing under the plan (the area of the
    largest image it accepts): a larger one is scaled down before it is encoded, so it costs no more
    compute than planned. None for a type without a rule here."""
    if rule_for(p.projector_type) is None:
        return None
    return max(nx * ny for nx, ny in largest_images(p, image_max_tokens))


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

"""Tiny vision projectors (mmproj GGUFs), written with gguf.GGUFWriter, that real libmtmd loads.

Each projector type gets the metadata and tensors clip.cpp's loader asks for
(`clip_model_loader::load_hparams` / `load_tensors`), with small shapes and random
weights: matrices in `weight_type`, norms and biases in F32, the patch embedding in F16.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, add_kv, write_random_tensors


@dataclass(frozen=True)
class ProjectorSpec:
    projector_type: str  # clip.projector_type: gemma3, qwen3vl_merger, pixtral, gemma4v
    image_size: int = 64
    patch_size: int = 8
    n_embd: int = 64
    n_head: int = 4
    n_ff: int = 128
    n_layer: int = 2
    n_embd_text: int = 128  # the projector's output: the text model's n_embd
    weight_type: Q = Q.F16
    # clip.vision.projector.scale_factor / spatial_merge_size; 0 keeps clip.cpp's default
    n_merge: int = 0
    # qwen3vl: the layers with a deepstack merger; the position table's side
    deepstack: tuple[int, ...] = ()
    n_pos_side: int = 0
    # gemma4v: the clamp scalars of Gemma4ClippableLinear beside every matrix (clip.cpp reads, never loads them)
    clamp_scalars: bool = True
    extra_kv: dict[str, object] = field(default_factory=dict)

    def with_(self, **changes: object) -> ProjectorSpec:
        return replace(self, **changes)  # type: ignore[arg-type]


def _mat(name: str, n_in: int, n_out: int, t: Q) -> tuple[str, tuple[int, ...], Q]:
    return (name, (n_in, n_out), t)


def _vec(name: str, n: int) -> tuple[str, tuple[int, ...], Q]:
    return (name, (n,), Q.F32)


def _gemma3(s: ProjectorSpec) -> Shapes:
    e, w = s.n_embd, s.weight_type
    side = s.image_size // s.patch_size
    out: Shapes = [
        ("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), Q.F16),
        _vec("v.patch_embd.bias", e),
        ("v.position_embd.weight", (e, side * side), Q.F32),
    ]
    for il in range(s.n_layer):
        p = f"v.blk.{il}."
        for kind in ("q", "k", "v"):
            out += [_mat(p + f"attn_{kind}.weight", e, e, w), _vec(p + f"attn_{kind}.bias", e)]
        out += [_mat(p + "attn_out.weight", e, e, w), _vec(p + "attn_out.bias", e)]
        out += [_vec(p + "ln1.weight", e), _vec(p + "ln1.bias", e), _vec(p + "ln2.weight", e), _vec(p + "ln2.bias", e)]
        out += [_mat(p + "ffn_up.weight", e, s.n_ff, w), _vec(p + "ffn_up.bias", s.n_ff)]
        out += [_mat(p + "ffn_down.weight", s.n_ff, e, w), _vec(p + "ffn_down.bias", e)]
    out += [_vec("v.post_ln.weight", e), _vec("v.post_ln.bias", e)]
    out += [("mm.input_projection.weight", (s.n_embd_text, e), w), _vec("mm.soft_emb_norm.weight", e)]
    return out


def _qwen3vl(s: ProjectorSpec) -> Shapes:
    e, w = s.n_embd, s.weight_type
    n_out = s.n_embd_text // (1 + len(s.deepstack))
    side = s.n_pos_side or s.image_size // s.patch_size
    out: Shapes = [
        ("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), Q.F16),
        ("v.patch_embd.weight.1", (s.patch_size, s.patch_size, 3, e), Q.F16),
        _vec("v.patch_embd.bias", e),
        ("v.position_embd.weight", (e, side * side), Q.F32),
    ]
    for il in range(s.n_layer):
        p = f"v.blk.{il}."
        out += [_mat(p + "attn_qkv.weight", e, 3 * e, w), _vec(p + "attn_qkv.bias", 3 * e)]
        out += [_mat(p + "attn_out.weight", e, e, w), _vec(p + "attn_out.bias", e)]
        out += [_vec(p + "ln1.weight", e), _vec(p + "ln1.bias", e), _vec(p + "ln2.weight", e), _vec(p + "ln2.bias", e)]
        out += [_mat(p + "ffn_up.weight", e, s.n_ff, w), _vec(p + "ffn_up.bias", s.n_ff)]
        out += [_mat(p + "ffn_down.weight", s.n_ff, e, w), _vec(p + "ffn_down.bias", e)]
        if il in s.deepstack:
            d = f"v.deepstack.{il}."
            out += [_vec(d + "norm.weight", 4 * e), _vec(d + "norm.bias", 4 * e)]
            out += [_mat(d + "fc1.weight", 4 * e, 4 * e, w), _vec(d + "fc1.bias", 4 * e)]
            out += [_mat(d + "fc2.weight", 4 * e, n_out, w), _vec(d + "fc2.bias", n_out)]
    out += [_vec("v.post_ln.weight", e), _vec("v.post_ln.bias", e)]
    out += [_mat("mm.0.weight", 4 * e, 4 * e, w), _vec("mm.0.bias", 4 * e)]
    out += [_mat("mm.2.weight", 4 * e, n_out, w), _vec("mm.2.bias", n_out)]
    return out


def _pixtral(s: ProjectorSpec) -> Shapes:
    """Mistral Small 3.1's Pixtral encoder with its patch merger (no merger when n_merge is 1)."""
    e, w = s.n_embd, s.weight_type
    merge = s.n_merge or 1
    out: Shapes = [("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), Q.F16), _vec("v.pre_ln.weight", e)]
    for il in range(s.n_layer):
        p = f"v.blk.{il}."
        for kind in ("q", "k", "v", "out"):
            out.append(_mat(p + f"attn_{kind}.weight", e, e, w))
        out += [_vec(p + "ln1.weight", e), _vec(p + "ln2.weight", e)]
        out += [_mat(p + "ffn_gate.weight", e, s.n_ff, w), _mat(p + "ffn_up.weight", e, s.n_ff, w)]
        out.append(_mat(p + "ffn_down.weight", s.n_ff, e, w))
    if merge > 1:
        out += [_vec("mm.input_norm.weight", e), _mat("mm.patch_merger.weight", e * merge * merge, e, w)]
    out += [_mat("mm.1.weight", e, s.n_embd_text, w), _vec("mm.1.bias", s.n_embd_text)]
    out += [_mat("mm.2.weight", s.n_embd_text, s.n_embd_text, w), _vec("mm.2.bias", s.n_embd_text)]
    out.append(_vec("v.token_embd.img_break", s.n_embd_text))
    return out


_CLAMP_BOUNDS = ("input_min", "input_max", "output_min", "output_max")


def _gemma4v(s: ProjectorSpec) -> Shapes:
    e, w = s.n_embd, s.weight_type
    d_head = e // s.n_head
    n_pos = s.n_pos_side or 256  # room for the positions of the largest images
    out: Shapes = [
        ("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), Q.F16),
        ("v.position_embd.weight", (e, n_pos, 2), Q.F32),
    ]
    for il in range(s.n_layer):
        p = f"v.blk.{il}."
        for kind in ("q", "k", "v", "out"):
            out.append(_mat(p + f"attn_{kind}.weight", e, e, w))
        out += [_vec(p + "attn_q_norm.weight", d_head), _vec(p + "attn_k_norm.weight", d_head)]
        out += [_vec(p + "ln1.weight", e), _vec(p + "ln2.weight", e)]
        out += [_vec(p + "attn_post_norm.weight", e), _vec(p + "ffn_post_norm.weight", e)]
        out += [_mat(p + "ffn_gate.weight", e, s.n_ff, w), _mat(p + "ffn_up.weight", e, s.n_ff, w)]
        out.append(_mat(p + "ffn_down.weight", s.n_ff, e, w))
    out += [_vec("v.std_bias", e), _vec("v.std_scale", e)]
    out.append(("mm.input_projection.weight", (e, s.n_embd_text), w))
    if s.clamp_scalars:  # Gemma4ClippableLinear's bounds beside each matrix of the blocks and the projection
        for name, shape, _t in list(out):
            if len(shape) == 2 and name.startswith(("v.blk.", "mm.")):
                stem = name.removesuffix(".weight")
                out += [(f"{stem}.{bound}", (1,), Q.F32) for bound in _CLAMP_BOUNDS]
    return out


_TENSORS = {"gemma3": _gemma3, "qwen3vl_merger": _qwen3vl, "pixtral": _pixtral, "gemma4v": _gemma4v}

# clip.cpp's activation keys per type (the real converters' choices)
_FFN_KEYS = {
    "gemma3": "clip.use_gelu",
    "qwen3vl_merger": "clip.use_gelu",
    "pixtral": "clip.use_silu",
    "gemma4v": "clip.use_gelu",
}
_MERGE_KEY = {
    "gemma3": "clip.vision.projector.scale_factor",
    "gemma4v": "clip.vision.projector.scale_factor",
    "qwen3vl_merger": "clip.vision.spatial_merge_size",
    "pixtral": "clip.vision.spatial_merge_size",
}


def tensors_of(spec: ProjectorSpec) -> Shapes:
    return _TENSORS[spec.projector_type](spec)


def write_tiny_projector(path: str | Path, spec: ProjectorSpec, seed: int = 0) -> Path:
    """Write a projector GGUF that libmtmd loads (mtmd_init_from_file) for `spec`."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name(f"tiny-{spec.projector_type}")
    writer.add_string("clip.projector_type", spec.projector_type)
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_uint32("clip.vision.image_size", spec.image_size)
    writer.add_uint32("clip.vision.patch_size", spec.patch_size)
    writer.add_uint32("clip.vision.embedding_length", spec.n_embd)
    writer.add_uint32("clip.vision.feed_forward_length", spec.n_ff)
    writer.add_uint32("clip.vision.attention.head_count", spec.n_head)
    writer.add_uint32("clip.vision.block_count", spec.n_layer)
    writer.add_uint32("clip.vision.projection_dim", spec.n_embd_text)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    if _FFN_KEYS[spec.projector_type]:
        writer.add_bool(_FFN_KEYS[spec.projector_type], True)
    if spec.n_merge:
        writer.add_uint32(_MERGE_KEY[spec.projector_type], spec.n_merge)
    for key, value in spec.extra_kv.items():
        add_kv(writer, key, value)
    write_random_tensors(writer, rng, tensors_of(spec))
    return path


def write_mlp_projector(
    path: str | Path, image_size: int = 224, patch_size: int = 14, n_embd: int = 128, n_layer: int = 2, seed: int = 0
) -> Path:
    """A small CLIP-style vision projector (mmproj, projector type "mlp") header with random weights."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_string("clip.projector_type", "mlp")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_uint32("clip.vision.image_size", image_size)
    writer.add_uint32("clip.vision.patch_size", patch_size)
    writer.add_uint32("clip.vision.embedding_length", n_embd)
    writer.add_uint32("clip.vision.feed_forward_length", 4 * n_embd)
    writer.add_uint32("clip.vision.attention.head_count", 4)
    writer.add_uint32("clip.vision.block_count", n_layer)
    shapes: Shapes = [("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), Q.F16)]
    for il in range(n_layer):
        p = f"v.blk.{il}."
        shapes += [
            (p + "attn_qkv.weight", (n_embd, 3 * n_embd), Q.F16),
            (p + "ffn_up.weight", (n_embd, 4 * n_embd), Q.F16),
            (p + "ffn_down.weight", (4 * n_embd, n_embd), Q.F16),
        ]
    shapes.append(("mm.0.weight", (n_embd, 256), Q.F16))
    write_random_tensors(writer, rng, shapes)
    return path


# Small shapes of each type: the warmup image of each is what clip.cpp reserves for.
PROJECTORS: dict[str, ProjectorSpec] = {
    "gemma3": ProjectorSpec("gemma3", image_size=64, patch_size=8, n_merge=2),
    "gemma3-q8_0": ProjectorSpec("gemma3", image_size=112, patch_size=14, weight_type=Q.Q8_0, n_merge=4),
    "qwen3vl": ProjectorSpec("qwen3vl_merger", patch_size=2, n_embd=32, n_head=2, deepstack=(0,), n_pos_side=8),
    "mistral3": ProjectorSpec("pixtral", patch_size=2, n_embd=32, n_head=2, n_merge=2),
    "gemma4v": ProjectorSpec("gemma4v", patch_size=2, n_embd=32, n_head=2, n_ff=64),
}

# more shapes of each type: clip.cpp's defaults (no merge key), other patch and head sizes, quantized matrices
OTHER_SHAPES = {
    "gemma3-448": ProjectorSpec("gemma3", image_size=448, patch_size=14, n_embd=128, n_ff=256),
    "gemma3-96-bf16": ProjectorSpec(
        "gemma3", image_size=96, patch_size=16, n_embd=96, n_head=3, n_ff=200, n_layer=3, n_merge=3, weight_type=Q.BF16
    ),
    # the position table on the warmup grid itself (no interpolation), two deepstack layers
    "qwen3vl-grid": ProjectorSpec(
        "qwen3vl_merger", patch_size=1, n_embd=32, n_head=2, n_layer=3, deepstack=(0, 2), n_embd_text=96, n_pos_side=92
    ),
    "qwen3vl-q8_0": ProjectorSpec(
        "qwen3vl_merger", n_embd=64, n_head=2, n_embd_text=64, n_pos_side=24, weight_type=Q.Q8_0, n_merge=2
    ),
    # Pixtral 12B's shape: no patch merger; and Mistral Small's merger with an odd patch size, Q8_0
    "pixtral-no-merger": ProjectorSpec("pixtral", patch_size=4, n_embd=64, n_head=4, n_ff=96),
    "mistral3-q8_0": ProjectorSpec(
        "pixtral", patch_size=3, n_embd=64, n_head=2, n_ff=160, n_layer=3, n_merge=2, weight_type=Q.Q8_0, n_embd_text=96
    ),
    # Gemma 4 without clamp bounds in the file (clip.cpp clamps anyway), 2x2 pooling, Q8_0; one head of 32
    "gemma4v-q8_0": ProjectorSpec(
        "gemma4v", patch_size=3, n_embd=64, n_ff=96, n_layer=3, n_merge=2, clamp_scalars=False, weight_type=Q.Q8_0
    ),
    "gemma4v-one-head": ProjectorSpec("gemma4v", patch_size=1, n_embd=32, n_head=1, n_ff=64, n_embd_text=96),
}

# the largest image each type accepts (or as many tokens as --image-max-tokens lets through, to keep
# the encoding short), encoded after the warmup: the buffer grows to the planner's peak, not beyond
LARGEST = {
    "mistral3": (PROJECTORS["mistral3"], None),  # 1024 tokens, square and one token wide
    "qwen3vl": (ProjectorSpec("qwen3vl_merger", patch_size=2, n_embd=32, n_head=1, n_layer=1, deepstack=(0,)), 2209),
    "gemma4v": (PROJECTORS["gemma4v"], 400),
    "gemma3": (PROJECTORS["gemma3"], None),  # a fixed image size: the warmup's
}

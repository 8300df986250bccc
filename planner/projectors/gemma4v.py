"""Gemma 4's vision projector (`gemma4v`): a ViT with 2D NeoX RoPE, per-head Q/K norms, RMS-normed V,
post-attention and post-FFN norms, learned x/y position tables, average pooling, standardisation and
a projection; every matrix product clamped (Gemma4ClippableLinear).

clip.cpp: `clip_graph_gemma4v::build` (models/gemma4v.cpp). The warmup image holds 16 x 16 pooled
tokens (`set_warmup_n_tokens(256)`). The clamp bounds (`*.input_min` ...) are read as scalars, not
loaded into the weight buffer.
"""

from __future__ import annotations

from planner.ggml_graph import Tensor
from planner.projector import Projector
from planner.projectors.clip import RMS, ClipGraph, ProjectorRule, token_grid

MAX_TOKENS = 1120  # set_limit_image_tokens' default maximum
WARMUP_TOKENS_PER_SIDE = 16
_CLAMP_BOUNDS = (".input_min", ".input_max", ".output_min", ".output_max")


def n_merge(p: Projector) -> int:
    return int(p.metadata.get("clip.vision.projector.scale_factor", 3))


def warmup_image(p: Projector) -> tuple[int, int]:
    side = WARMUP_TOKENS_PER_SIDE * p.patch_size * n_merge(p)
    return side, side


def unloaded(name: str) -> bool:
    return name.endswith(_CLAMP_BOUNDS)


def largest_images(p: Projector, max_tokens: int) -> list[tuple[int, int]]:
    """Images of max_tokens tokens (the dynamic-size preprocessor aligns both sides to patch x merge)."""
    align = p.patch_size * n_merge(p)
    cols, rows = token_grid(max_tokens)
    images = [(cols * align, rows * align)]
    return images


def build(c: ClipGraph) -> Tensor:
    g, hp = c.g, c.hp

    def clamped_mm(w: Tensor, x: Tensor) -> Tensor:  # every loaded ".weight" has clamp bounds (default: none)
        return g.clamp(g.mul_mat(w, g.clamp(x)))

    c.mm_hook = clamped_mm
    inp_raw = g.scale(c.inp_raw())  # patches * 2 - 1
    patch = c.w_req("v.patch_embd.weight")
    inp = c.conv_2d(patch, inp_raw, hp.patch_size, hp.patch_size)
    inp = g.reshape(inp, c.n_patches, hp.n_embd, c.n_batch)
    inp = g.cont(g.transpose(inp))

    pos_x = c.input_i32(c.n_patches, "pos_x")
    pos_y = c.input_i32(c.n_patches, "pos_y")
    table = c.w_req("v.position_embd.weight")
    pos_size, nb1 = table.ne[1], table.type.row_bytes(hp.n_embd)
    tbl_x = g.view(table, (hp.n_embd, pos_size), (nb1,), 0)
    tbl_y = g.view(table, (hp.n_embd, pos_size), (nb1,), pos_size * nb1)
    inp = g.add(inp, g.get_rows(tbl_x, pos_x))
    inp = g.add(inp, g.get_rows(tbl_y, pos_y))

    def rope_2d(cur: Tensor) -> Tensor:
        return g.rope(g.rope(cur, pos_x), pos_y)

    cur = c.vit(inp, c.n_patches, RMS, add_pos=rope_2d, norm_v=True)

    kernel = n_merge(c.p)
    cur = g.cont(g.transpose(cur), (c.n_patches_x, c.n_patches_y, hp.n_embd, c.n_batch))
    cur = c.pool_2d(cur, kernel, kernel)
    out_x, out_y = c.n_patches_x // kernel, c.n_patches_y // kernel
    cur = g.reshape(cur, out_x * out_y, hp.n_embd, c.n_batch)
    cur = g.scale(g.cont(g.transpose(cur)))
    std_bias, std_scale = c.w("v.std_bias"), c.w("v.std_scale")
    if std_bias is not None and std_scale is not None:
        cur = g.mul(g.sub(cur, std_bias), std_scale)
    cur = g.rms_norm(cur)
    proj = c.w_req("mm.input_projection.weight")
    return c.mm(proj, cur)


RULE = ProjectorRule(warmup_image, build, largest_images=largest_images, max_tokens=MAX_TOKENS, unloaded=unloaded)

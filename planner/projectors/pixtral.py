"""Pixtral's projector (`pixtral`; Mistral Small 3.1 and later with a patch merger): a ViT with 2D RoPE,
RMS norms and SwiGLU, the 2x2 patch merger when the file has one, the LLaVA MLP, and an [IMG_BREAK]
embedding after every row.

clip.cpp: `clip_graph_pixtral::build` (models/pixtral.cpp). The warmup image holds 16 x 16 output
tokens (`set_warmup_n_tokens(256)`), whatever the image token limits.
"""

from __future__ import annotations

from planner.ggml_graph import F32, Tensor
from planner.projector import Projector
from planner.projectors.clip import RMS, ClipGraph, ProjectorRule, token_grid

MAX_TOKENS = 1024  # set_limit_image_tokens' default maximum
WARMUP_TOKENS_PER_SIDE = 16


def n_merge(p: Projector) -> int:
    return int(p.metadata.get("clip.vision.spatial_merge_size", 1))


def warmup_image(p: Projector) -> tuple[int, int]:
    side = WARMUP_TOKENS_PER_SIDE * p.patch_size * n_merge(p)
    return side, side


def largest_images(p: Projector, max_tokens: int) -> list[tuple[int, int]]:
    """Images of max_tokens tokens (the dynamic-size preprocessor aligns both sides to patch x merge)."""
    align = p.patch_size * n_merge(p)
    cols, rows = token_grid(max_tokens)
    images = [(cols * align, rows * align)]
    # one token wide: the most [IMG_BREAK] rows for as many tokens
    images.append((align, max_tokens * align))
    return images


def build(c: ClipGraph) -> Tensor:
    g, hp = c.g, c.hp
    merge = n_merge(c.p)
    pos_h = c.input_i32(c.n_patches, "pos_h")
    pos_w = c.input_i32(c.n_patches, "pos_w")

    def rope_2d(cur: Tensor) -> Tensor:  # clip_graph::build_rope_2d: two half-width RoPEs
        return g.rope(g.rope(cur, pos_h), pos_w)

    inp = c.build_inp()
    cur = c.vit(inp, c.n_patches, RMS, add_pos=rope_2d)

    merger = c.w("mm.patch_merger.weight")
    if merger is not None:
        cur = g.mul(g.rms_norm(cur), c.w_req("mm.input_norm.weight"))
        cur = g.reshape(cur, hp.n_embd, c.n_patches_x, c.n_patches_y)
        cur = g.cont(g.permute(cur, 2, 0, 1, 3))
        kernel = g.view(cur, (merge, merge, cur.ne[2]), (0, 0), 0)  # a dummy kernel: only its shape counts
        cur = c.im2col(kernel, cur, merge, merge, F32)
        cur = g.reshape(cur, cur.ne[0], cur.ne[1] * cur.ne[2])
        cur = c.mm(merger, cur)

    cur = c.ffn(cur, c.w("mm.1.weight"), c.w("mm.1.bias"), None, None, c.w("mm.2.weight"), c.w("mm.2.bias"), "gelu")

    img_break = c.w("v.token_embd.img_break")
    if img_break is not None:
        p_y, p_x = c.n_patches_y // merge, c.n_patches_x // merge
        n_text = cur.ne[0]
        tmp = g.reshape(cur, n_text, p_x, p_y)
        tok = g.new_tensor(tmp.type, (n_text, 1, p_y), "img_break_rows")  # a leaf of the compute buffer
        tok = g.add(g.scale(tok), img_break)
        tmp = g.concat(tmp, tok, 1)
        cur = g.view(tmp, (n_text, p_x * p_y + p_y - 1), (tmp.type.row_bytes(n_text),), 0)
    return cur


RULE = ProjectorRule(warmup_image, build, largest_images=largest_images, max_tokens=MAX_TOKENS)

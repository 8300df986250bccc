"""Qwen3-VL's projector (`qwen3vl_merger`): two patch convolutions (temporal merge), 2x2 spatial merge,
a ViT with M-RoPE and fused QKV, deepstack mergers on some layers, and the final merger MLP.

clip.cpp: `clip_graph_qwen3vl::build` (models/qwen3vl.cpp). The warmup image holds 46 x 46
merged tokens (`set_warmup_n_tokens(46*46)`), whatever the image token limits.
"""

from __future__ import annotations

from functools import partial

from planner.ggml_graph import F32, Tensor
from planner.projector import Projector
from planner.projectors.clip import NORM, ClipGraph, ProjectorRule, token_grid

MAX_TOKENS = 4096  # set_limit_image_tokens' default maximum
WARMUP_TOKENS_PER_SIDE = 46


def n_merge(p: Projector) -> int:
    return int(p.metadata.get("clip.vision.spatial_merge_size", 2))


def warmup_image(p: Projector) -> tuple[int, int]:
    side = WARMUP_TOKENS_PER_SIDE * p.patch_size * n_merge(p)
    return side, side


def resize_position_embeddings(c: ClipGraph, pos: Tensor) -> Tensor:
    """clip_graph::resize_position_embeddings: the learned table, interpolated when the grid differs."""
    g, n_embd = c.g, c.hp.n_embd
    side = int(pos.ne[1] ** 0.5)
    width, height = c.n_patches_x, c.n_patches_y
    if width == side and height == side:
        return pos
    pos = g.reshape(pos, n_embd, side, side)
    pos = g.permute(pos, 2, 0, 1, 3)
    pos = g.op("UPSCALE", F32, (width, height, n_embd, 1), [pos])
    pos = g.permute(pos, 1, 2, 0, 3)
    return g.cont(pos, (n_embd, width * height))


def _spatial_merge(c: ClipGraph, t: Tensor) -> Tensor:
    """Rows of two neighbouring patches, then two rows: the 2x2 merge order clip.cpp lays out."""
    g, n_embd = c.g, c.hp.n_embd
    px, py = c.n_patches_x, c.n_patches_y
    t = g.cont(t, (n_embd * 2, px // 2, py, 1))
    t = g.reshape(t, n_embd * 2, px // 2, 2, py // 2)
    t = g.permute(t, 0, 2, 1, 3)
    return g.cont(t, (n_embd, px * py, 1))


def largest_images(p: Projector, max_tokens: int) -> list[tuple[int, int]]:
    """Images of max_tokens tokens (the dynamic-size preprocessor aligns both sides to patch x merge)."""
    align = p.patch_size * n_merge(p)
    cols, rows = token_grid(max_tokens)
    images = [(cols * align, rows * align)]
    return images


def build(c: ClipGraph) -> Tensor:
    g, hp = c.g, c.hp
    n_pos = c.n_patches
    inp_raw = c.inp_raw()
    ps = hp.patch_size
    patch0, patch1 = c.w_req("v.patch_embd.weight"), c.w_req("v.patch_embd.weight.1")
    inp = g.add(c.conv_2d(patch0, inp_raw, ps, ps), c.conv_2d(patch1, inp_raw, ps, ps))
    inp = _spatial_merge(c, g.permute(inp, 1, 2, 0, 3))
    bias = c.w("v.patch_embd.bias")
    if bias is not None:
        inp = g.add(inp, bias)
    pos_embd = c.w_req("v.position_embd.weight")
    inp = g.add(inp, _spatial_merge(c, resize_position_embeddings(c, pos_embd)))

    inp_l = inp
    positions = c.input_i32(n_pos * 4, "positions")
    pre_w = c.w("v.pre_ln.weight")
    if pre_w is not None:
        inp_l = c.norm(inp_l, pre_w, c.w("v.pre_ln.bias"), NORM)

    merge_factor = n_merge(c.p) ** 2
    deepstack: Tensor | None = None
    for il in range(hp.n_layer):
        lw = partial(c.layer, il)  # this layer's weight by name
        cur = c.norm(inp_l, lw("ln1.weight"), lw("ln1.bias"), NORM)
        qkv_w, qkv_b = lw("attn_qkv.weight"), lw("attn_qkv.bias")
        assert qkv_w is not None and qkv_b is not None
        cur = g.add(c.mm(qkv_w, cur), qkv_b)
        strides = (cur.type.row_bytes(hp.d_head), cur.nb[1])
        shape = (hp.d_head, hp.n_head, n_pos)
        q = g.view(cur, shape, strides, 0)
        k = g.view(cur, shape, strides, cur.type.row_bytes(hp.n_embd))
        v = g.view(cur, shape, strides, cur.type.row_bytes(2 * hp.n_embd))
        q = g.rope(q, positions)
        k = g.rope(k, positions)
        cur = c.attn(lw("attn_out.weight"), lw("attn_out.bias"), q, k, v)
        cur = g.add(cur, inp_l)
        inp_l = cur
        cur = c.norm(cur, lw("ln2.weight"), lw("ln2.bias"), NORM)
        cur = c.ffn(
            cur,
            lw("ffn_up.weight"),
            lw("ffn_up.bias"),
            lw("ffn_gate.weight"),
            lw("ffn_gate.bias"),
            lw("ffn_down.weight"),
            lw("ffn_down.bias"),
            hp.ffn_op,
        )
        cur = g.add(inp_l, cur)
        fc1 = c.w(f"v.deepstack.{il}.fc1.weight")
        if fc1 is not None:
            feat = g.reshape(cur, hp.n_embd * merge_factor, n_pos // merge_factor, 1)
            feat = c.norm(feat, c.w(f"v.deepstack.{il}.norm.weight"), c.w(f"v.deepstack.{il}.norm.bias"), NORM)
            feat = c.ffn(
                feat,
                fc1,
                c.w(f"v.deepstack.{il}.fc1.bias"),
                None,
                None,
                c.w(f"v.deepstack.{il}.fc2.weight"),
                c.w(f"v.deepstack.{il}.fc2.bias"),
                "gelu",
            )
            deepstack = feat if deepstack is None else g.concat(deepstack, feat, 0)
        inp_l = cur

    post_w = c.w("v.post_ln.weight")
    if post_w is not None:
        inp_l = c.norm(inp_l, post_w, c.w("v.post_ln.bias"), NORM)
    emb = g.reshape(inp_l, hp.n_embd * 4, n_pos // 4, 1)
    emb = c.ffn(emb, c.w("mm.0.weight"), c.w("mm.0.bias"), None, None, c.w("mm.2.weight"), c.w("mm.2.bias"), "gelu")
    if deepstack is not None:
        emb = g.concat(emb, deepstack, 0)
    return emb


RULE = ProjectorRule(warmup_image, build, largest_images=largest_images, max_tokens=MAX_TOKENS)

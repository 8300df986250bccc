"""Gemma 3's projector (`gemma3`): a SigLIP encoder, average pooling, an RMS norm and a projection.

clip.cpp: `clip_graph_siglip::build` (models/siglip.cpp). The warmup image is the
trained `image_size` (Gemma 3 resizes every image to it).
"""

from __future__ import annotations

from planner.ggml_graph import Tensor
from planner.projector import Projector
from planner.projectors.clip import NORM, ClipGraph, ProjectorRule


def warmup_image(p: Projector) -> tuple[int, int]:
    return p.image_size, p.image_size


def n_merge(p: Projector) -> int:
    return int(p.metadata.get("clip.vision.projector.scale_factor", 4))


def build(c: ClipGraph) -> Tensor:
    g, hp = c.g, c.hp
    inp = c.build_inp()
    cur = c.vit(inp, c.n_patches, NORM, learned_pos=c.w("v.position_embd.weight"))
    side, kernel = c.n_patches_x, n_merge(c.p)
    cur = g.transpose(cur)
    cur = g.cont(cur, (side, side, hp.n_embd, 1))
    cur = c.pool_2d(cur, kernel, kernel)
    cur = g.reshape(cur, cur.ne[0] * cur.ne[0], hp.n_embd, 1)
    cur = g.cont(g.transpose(cur))
    cur = g.rms_norm(cur)
    cur = g.mul(cur, c.w_req("mm.soft_emb_norm.weight"))
    proj = c.w_req("mm.input_projection.weight")
    return g.mul_mat(g.cont(g.transpose(proj)), cur)


RULE = ProjectorRule(warmup_image, build)

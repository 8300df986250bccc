"""The pieces every projector graph shares, as clip.cpp's `clip_graph` builds them.

A family module (`planner.projectors.<family>`) builds its encoder from these with
the same ops in the same order as its `tools/mtmd/models/<family>.cpp`, on the
shape-only graph of `planner.ggml_graph`; `planner.projectors.compute` then
replays ggml's allocator over it, as clip's warmup reserves its compute buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from planner.errors import ModelError
from planner.ggml_graph import Graph, Tensor
from planner.ggml_types import F16, F32, I32, GGMLType, ggml_type
from planner.projector import Projector

NORM = "norm"
RMS = "rms"


@dataclass(frozen=True)
class ClipParams:
    """clip_hparams as `clip_model_loader::load_hparams` reads them for the vision encoder."""

    n_embd: int
    n_head: int
    n_head_kv: int
    d_head: int
    n_ff: int
    n_layer: int
    ffn_op: str  # gelu, silu, gelu_quick
    patch_size: int
    image_size: int

    @classmethod
    def of(cls, p: Projector) -> ClipParams:
        md = p.metadata
        n_head = p.n_head
        n_head_kv = int(md.get("clip.vision.attention.head_count_kv", n_head))
        d_head = int(md.get("clip.vision.attention.head_dim", 0)) or (p.n_embd // n_head if n_head else 0)
        if md.get("clip.use_gelu"):
            ffn_op = "gelu"
        elif md.get("clip.use_silu"):
            ffn_op = "silu"
        else:
            ffn_op = "gelu_quick"
        return cls(p.n_embd, n_head, n_head_kv, d_head, p.n_ff, p.n_layer, ffn_op, p.patch_size, p.image_size)


@dataclass(frozen=True)
class ProjectorRule:
    """What a family module (`planner.projectors.<family>`) tells the planner, as its `RULE`."""

    warmup_image: Callable[[Projector], tuple[int, int]]  # the image (nx, ny) clip's warmup reserves for
    build: Callable[[ClipGraph], Tensor]  # the encoder graph
    # encoders of dynamic resolution: the images of `max_tokens` tokens that need the most compute,
    # and clip.cpp's default limit (None: the encoder sees one fixed size, the warmup image)
    largest_images: Callable[[Projector, int], list[tuple[int, int]]] | None = None
    max_tokens: int = 0
    # tensors of the file clip.cpp reads as scalars and leaves out of its weight buffer
    unloaded: Callable[[str], bool] | None = None


def token_grid(n_tokens: int) -> tuple[int, int]:
    """The most square grid of exactly n_tokens tokens (columns, rows)."""
    cols = max(d for d in range(1, int(n_tokens**0.5) + 1) if n_tokens % d == 0)
    return cols, n_tokens // cols


class ClipGraph:
    """One encoder graph for an image of nx x ny pixels (a batch of one, as the warmup builds it)."""

    def __init__(self, p: Projector, nx: int, ny: int, flash_attn: bool, weight_backend: str = "host") -> None:
        self.p = p
        self.hp = ClipParams.of(p)
        self.g = Graph()
        self.nx, self.ny = nx, ny
        self.flash_attn = flash_attn
        self.n_batch = 1
        ps = self.hp.patch_size
        self.n_patches_x, self.n_patches_y = nx // ps, ny // ps
        self.n_patches = self.n_patches_x * self.n_patches_y
        self._backend = weight_backend
        self._infos = {t.name: t for t in p.tensors}
        self._weights: dict[str, Tensor] = {}
        # a family may wrap every matrix product (gemma4v clamps its inputs and outputs)
        self.mm_hook: Callable[[Tensor, Tensor], Tensor] | None = None

    # -- weights ---------------------------------------------------------------------------

    def w(self, name: str) -> Tensor | None:
        """The weight `name` as a pre-allocated graph tensor, None when the file lacks it."""
        if name in self._weights:
            return self._weights[name]
        info = self._infos.get(name)
        if info is None:
            return None
        t = self.g.weight(info.type, info.shape, name, backend=self._backend)
        self._weights[name] = t
        return t

    def w_req(self, name: str) -> Tensor:
        """The weight `name`, which clip.cpp requires: without it, it refuses the projector."""
        t = self.w(name)
        if t is None:
            raise ModelError(self.p.path, f"tensor {name} is missing (clip.cpp refuses the projector)")
        return t

    def layer(self, il: int, name: str) -> Tensor | None:
        return self.w(f"v.blk.{il}.{name}")

    # -- ops -------------------------------------------------------------------------------

    def mm(self, w: Tensor, x: Tensor) -> Tensor:
        if self.mm_hook is not None:
            return self.mm_hook(w, x)
        return self.g.mul_mat(w, x)

    def cont(self, a: Tensor, *ne: int) -> Tensor:
        return self.g.cont(a, tuple(ne) if ne else None)

    def im2col(self, a: Tensor, b: Tensor, s0: int, s1: int, dst: GGMLType) -> Tensor:
        """ggml_im2col, 2D, no padding or dilation: [IC*KH*KW, OW, OH, N]."""
        oh = (b.ne[1] - a.ne[1]) // s1 + 1
        ow = (b.ne[0] - a.ne[0]) // s0 + 1
        return self.g.op("IM2COL", dst, (a.ne[2] * a.ne[1] * a.ne[0], ow, oh, b.ne[3]), [a, b])

    def conv_2d(self, a: Tensor, b: Tensor, s0: int, s1: int) -> Tensor:
        g = self.g
        im2col = self.im2col(a, b, s0, s1, F32 if a.type is ggml_type("bf16") else F16)
        result = g.mul_mat(
            g.reshape(im2col, im2col.ne[0], im2col.ne[3] * im2col.ne[2] * im2col.ne[1]),
            g.reshape(a, a.ne[0] * a.ne[1] * a.ne[2], a.ne[3]),
        )
        result = g.reshape(result, im2col.ne[1], im2col.ne[2], im2col.ne[3], a.ne[3])
        return g.cont(g.permute(result, 0, 1, 3, 2))

    def pool_2d(self, a: Tensor, k: int, s: int) -> Tensor:
        ne = ((a.ne[0] - k) // s + 1, (a.ne[1] - k) // s + 1, a.ne[2], a.ne[3])
        return self.g.op("POOL_2D", F32, ne, [a])

    # -- clip_graph's builders -------------------------------------------------------------

    def inp_raw(self, channels: int = 3) -> Tensor:
        return self.g.input(F32, (self.nx, self.ny, channels, self.n_batch), "inp_raw")

    def input_i32(self, n: int, name: str) -> Tensor:
        return self.g.input(I32, (n,), name)

    def build_inp(self, inp_raw: Tensor | None = None) -> Tensor:
        """Patches through the patch embedding's convolution: [n_embd, n_patches]."""
        g = self.g
        inp_raw = self.inp_raw() if inp_raw is None else inp_raw
        patch = self.w_req("v.patch_embd.weight")
        ps = self.hp.patch_size
        inp = self.conv_2d(patch, inp_raw, ps, ps)
        inp = g.reshape(inp, self.n_patches, self.hp.n_embd, self.n_batch)
        inp = g.cont(g.transpose(inp))
        bias = self.w("v.patch_embd.bias")
        if bias is not None:
            inp = g.add(inp, bias)
        return inp

    def norm(self, cur: Tensor, mw: Tensor | None, mb: Tensor | None, kind: str) -> Tensor:
        g = self.g
        cur = g.rms_norm(cur) if kind == RMS else g.norm(cur)
        if mw is not None:
            cur = g.mul(cur, mw)
        if mb is not None:
            cur = g.add(cur, mb)
        return cur

    def ffn(
        self,
        cur: Tensor,
        up: Tensor | None,
        up_b: Tensor | None,
        gate: Tensor | None,
        gate_b: Tensor | None,
        down: Tensor | None,
        down_b: Tensor | None,
        op: str,
    ) -> Tensor:
        g = self.g
        tmp = self.mm(up, cur) if up is not None else cur
        if up_b is not None:
            tmp = g.add(tmp, up_b)
        if gate is not None:
            cur = self.mm(gate, cur)
            if gate_b is not None:
                cur = g.add(cur, gate_b)
            cur = g.glu_split(cur, tmp)
        else:
            cur = g.unary(tmp)
        if down is not None:
            cur = self.mm(down, cur)
        if down_b is not None:
            cur = g.add(cur, down_b)
        return cur

    def attn(
        self,
        wo: Tensor | None,
        wo_b: Tensor | None,
        q_cur: Tensor,
        k_cur: Tensor,
        v_cur: Tensor,
        mask: Tensor | None = None,
    ) -> Tensor:
        """clip_graph::build_attn: a flat [n_embd, n_pos] result."""
        g = self.g
        # ggml_build_forward_order: Q, K and V enter the graph now, in this order
        g.expand(q_cur)
        g.expand(k_cur)
        g.expand(v_cur)
        q = g.permute(q_cur, 0, 2, 1, 3)
        k = g.permute(k_cur, 0, 2, 1, 3)
        if self.flash_attn:
            v = g.permute(v_cur, 0, 2, 1, 3)
            k = g.cast(k, F16)
            v = g.cast(v, F16)
            if mask is not None:
                mask = g.cast(mask, F16)
            cur = g.flash_attn_ext(q, k, v, mask)
            cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        else:
            v = g.cont(g.permute(v_cur, 1, 2, 0, 3))
            kq = g.mul_mat(k, q)
            kq = g.soft_max_ext(kq, mask)
            kqv = g.mul_mat(v, kq)
            cur = g.permute(kqv, 0, 2, 1, 3)
            cur = g.cont(cur, (cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3]))
        if wo is not None:
            cur = self.mm(wo, cur)
        if wo_b is not None:
            cur = g.add(cur, wo_b)
        return cur

    def vit(
        self,
        inp: Tensor,
        n_pos: int,
        norm_kind: str,
        learned_pos: Tensor | None = None,
        add_pos: Callable[[Tensor], Tensor] | None = None,
        norm_v: bool = False,
    ) -> Tensor:
        """clip_graph::build_vit (dense FFNs; `norm_v`: gemma4v RMS-normalises V)."""
        g, hp = self.g, self.hp
        batch = inp.ne[2]
        if learned_pos is not None:
            inp = g.add(inp, learned_pos)
        inp_l = g.reshape(inp, hp.n_embd, n_pos * batch)
        pre_w = self.w("v.pre_ln.weight")
        if pre_w is not None:
            inp_l = self.norm(inp_l, pre_w, self.w("v.pre_ln.bias"), norm_kind)
        for il in range(hp.n_layer):
            lw = partial(self.layer, il)  # this layer's weight by name
            cur = self.norm(inp_l, lw("ln1.weight"), lw("ln1.bias"), norm_kind)
            q_norm, k_norm = lw("attn_q_norm.weight"), lw("attn_k_norm.weight")
            qkv_w = lw("attn_qkv.weight")
            if qkv_w is not None:
                cur = self.mm(qkv_w, cur)
                qkv_b = lw("attn_qkv.bias")
                if qkv_b is not None:
                    cur = g.add(cur, qkv_b)
                rs = cur.type.row_bytes(hp.d_head)
                strides = (rs, cur.nb[1], cur.nb[1] * n_pos)
                shape = (hp.d_head, hp.n_head, n_pos, batch)
                q = g.view(cur, shape, strides, 0)
                k = g.view(cur, shape, strides, cur.type.row_bytes(hp.n_head * hp.d_head))
                v = g.view(cur, shape, strides, cur.type.row_bytes(2 * hp.n_head * hp.d_head))
                if q_norm is not None:
                    q = self.norm(q, q_norm, None, norm_kind)
                if k_norm is not None:
                    k = self.norm(k, k_norm, None, norm_kind)
            else:
                q = self._proj(cur, lw("attn_q.weight"), lw("attn_q.bias"))
                k = self._proj(cur, lw("attn_k.weight"), lw("attn_k.bias"))
                v = self._proj(cur, lw("attn_v.weight"), lw("attn_v.bias"))
                per_head = q_norm is not None and q_norm.ne[0] == hp.d_head
                if not per_head:
                    if q_norm is not None:
                        q = self.norm(q, q_norm, None, norm_kind)
                    if k_norm is not None:
                        k = self.norm(k, k_norm, None, norm_kind)
                q = g.reshape(q, hp.d_head, hp.n_head, n_pos, batch)
                k = g.reshape(k, hp.d_head, hp.n_head_kv, n_pos, batch)
                v = g.reshape(v, hp.d_head, hp.n_head_kv, n_pos, batch)
                if per_head:
                    if q_norm is not None:
                        q = self.norm(q, q_norm, None, norm_kind)
                    if k_norm is not None:
                        k = self.norm(k, k_norm, None, norm_kind)
            if add_pos is not None:
                q = add_pos(q)
                k = add_pos(k)
            if norm_v:
                v = g.rms_norm(v)
            cur = self.attn(lw("attn_out.weight"), lw("attn_out.bias"), q, k, v)
            ls1 = lw("ls1.weight")
            if ls1 is not None:
                cur = g.mul(cur, ls1)
            post = lw("attn_post_norm.weight")
            if post is not None:
                cur = self.norm(cur, post, None, norm_kind)
            cur = g.add(cur, inp_l)
            inp_l = cur
            cur = self.norm(cur, lw("ln2.weight"), lw("ln2.bias"), norm_kind)
            cur = self.ffn(
                cur,
                lw("ffn_up.weight"),
                lw("ffn_up.bias"),
                lw("ffn_gate.weight"),
                lw("ffn_gate.bias"),
                lw("ffn_down.weight"),
                lw("ffn_down.bias"),
                hp.ffn_op,
            )
            ff_post = lw("ffn_post_norm.weight")
            if ff_post is not None:
                cur = self.norm(cur, ff_post, None, norm_kind)
            ls2 = lw("ls2.weight")
            if ls2 is not None:
                cur = g.mul(cur, ls2)
            cur = g.add(inp_l, cur)
            ls_out = lw("out_scale.weight")
            if ls_out is not None:
                cur = g.mul(cur, ls_out)
            inp_l = cur
        post_w = self.w("v.post_ln.weight")
        if post_w is not None:
            inp_l = self.norm(inp_l, post_w, self.w("v.post_ln.bias"), norm_kind)
        return g.reshape(inp_l, hp.n_embd, inp_l.ne[1] // batch, batch)

    def _proj(self, cur: Tensor, w: Tensor | None, b: Tensor | None) -> Tensor:
        assert w is not None
        out = self.mm(w, cur)
        return self.g.add(out, b) if b is not None else out

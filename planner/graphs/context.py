"""A mirror of llama.cpp's `llm_graph_context` helpers (src/llama-graph.cpp).

Each method builds the same tensors, in the same order, as its C++ namesake,
so that the graph allocator replay sees what llama.cpp's scheduler sees when
it reserves the compute buffers for a worst-case micro-batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from planner.errors import ModelError
from planner.ggml_graph import F16, F32, FLAG_OUTPUT, I32, I64, Graph, Tensor, row_size
from planner.ggml_types import GGMLType
from planner.hparams import Experts
from planner.model import LayerAnatomy, ModelAnatomy

# the architectures whose SwiGLU limit is one fused op (ggml_swiglu_clamp) rather than clamp nodes, in
# build_ffn and in build_moe_ffn
_FUSED_SWIGLU_CLAMP = frozenset(("deepseek4", "glm5-next"))
_FUSED_SWIGLU_CLAMP_EXPERTS = frozenset(("deepseek4", "glm5-next", "maple", "hy_v4"))


def _limit(limits: list[float], il: int) -> float:
    """A layer's SwiGLU limit, 0 when it has none (llama.cpp's threshold is 1e-6)."""
    return limits[il] if 0 <= il < len(limits) and limits[il] > 1e-6 else 0.0


@dataclass(frozen=True)
class GraphShape:
    """The micro-batch and cache shape a reserve graph is built for."""

    n_tokens: int
    n_seqs: int
    n_outputs: int
    flash_attn: bool
    type_k: GGMLType
    type_v: GGMLType
    kv_unified: bool
    n_kv: int  # cells of the full-attention cache (all of them at reserve time)
    n_kv_swa: int  # cells of the sliding-window cache
    n_stream: int  # KV streams: 1 when unified, else n_seq_max
    n_rs: int = 1  # recurrent state slots (max(1, n_seq_max))

    @property
    def v_trans(self) -> bool:
        return not self.flash_attn


class GraphContext:
    """Builds one model graph for one GraphShape."""

    def __init__(self, model: ModelAnatomy, shape: GraphShape, weights: WeightSet, graph: Graph) -> None:
        self.model = model
        self.shape = shape
        self.w = weights
        self.g = graph
        self.n_tokens = shape.n_tokens
        self.n_outputs = shape.n_outputs
        self.n_embd = model.n_embd
        self.t_embd: Tensor | None = None
        self.t_logits: Tensor | None = None
        self._inp_pos: Tensor | None = None

    # -- inputs ----------------------------------------------------------------------------

    def build_inp_embd(self) -> Tensor:
        """Token embeddings; models with deepstack layers (qwen3vl) take wider inputs, padded, of which
        the layers see a view (llm_graph_context::build_inp_embd, hparams.n_embd_inp)."""
        g = self.g
        tok_embd = self.w.get("token_embd.weight")
        n_inp = self.model.n_embd_inp or self.n_embd
        tokens = g.input(I32, (self.n_tokens,), "inp_tokens")
        embd = g.input(F32, (n_inp, self.n_tokens), "inp_embd")
        cur = g.get_rows(tok_embd, tokens)
        if n_inp != self.n_embd:
            cur = g.pad(cur, n_inp - self.n_embd)
        # ggml_build_forward_select(gf, {cur, embd}, 0): both are visited
        g.expand(cur)
        g.expand(embd)
        if n_inp != self.n_embd:
            cur = g.view(cur, (self.n_embd, self.n_tokens), (cur.nb[1],), 0)
        self.inp_embd = cur
        if self.model.granite is not None and self.model.granite.embedding:
            if not cur.is_contiguous():  # the view of a wide (deepstack) input
                cur = g.cont(cur)
            cur = g.scale(cur)
        g.expand(cur)
        return cur

    def deepstack(self, cur: Tensor, il: int) -> Tensor:
        """qwen3vl: the first n_deepstack layers add their slice of the wide input to their output."""
        if il >= self.model.n_deepstack:
            return cur
        src = self.inp_embd
        ds = self.g.view(src, (self.n_embd, self.n_tokens), (src.nb[1],), (il + 1) * self.n_embd * 4)
        return self.g.add(cur, ds)

    def build_inp_pos(self) -> Tensor:
        """Positions: four per token with multi-section RoPE (hparams.n_pos_per_embd)."""
        n_pos = self.model.n_pos_per_embd
        self._inp_pos = self.g.input(I32, (self.n_tokens * n_pos,), "inp_pos")
        return self._inp_pos

    def build_inp_out_ids(self) -> Tensor:
        return self.g.input(I32, (self.n_outputs,), "out_ids")

    # -- common blocks ---------------------------------------------------------------------

    def build_norm(
        self, cur: Tensor, weight: Tensor | None, bias: Tensor | None = None, rms: bool = True, il: int = -1
    ) -> Tensor:
        g = self.g
        cur = g.rms_norm(cur) if rms else g.norm(cur)
        if (weight is not None or bias is not None) and il >= 0:
            cur.pin_layer = il  # cb(cur, "norm", il)
        if weight is not None:
            cur = g.mul(cur, weight)
        if bias is not None:
            cur = g.add(cur, bias)
        return cur

    def mm(self, weight: Tensor, cur: Tensor, scale: Tensor | None = None) -> Tensor:
        """build_lora_mm without adapters."""
        res = self.g.mul_mat(weight, cur)
        if scale is not None:
            res = self.g.mul(res, scale)
        return res

    def build_qkv(
        self,
        layer: LayerAnatomy,
        cur: Tensor,
        head_q: int,
        n_head: int,
        head_k: int,
        n_head_kv: int,
        head_v: int | None = None,
        reshape: bool = True,
    ) -> tuple[Tensor, Tensor, Tensor]:
        g, w, il = self.g, self.w, layer.index
        head_v = head_k if head_v is None else head_v
        n_embd_q, n_embd_k = head_q * n_head, head_k * n_head_kv
        wqkv = w.layer(il, "attn_qkv.weight")
        n_tok = self.n_tokens
        if wqkv is not None:
            qkv = self.mm(wqkv, cur, w.layer(il, "attn_qkv.scale"))
            bias = w.layer(il, "attn_qkv.bias")
            if bias is not None:
                qkv = g.add(qkv, bias)
            else:
                qb, kb, vb = (w.layer(il, f"attn_{x}.bias") for x in "qkv")
                if qb is not None and kb is not None and vb is not None:
                    qkv = g.add(qkv, g.concat(g.concat(qb, kb, 0), vb, 0))
            if reshape and self.model.f_clamp_kqv > 0:
                qkv = g.clamp(qkv)
            es = qkv.type.type_size
            if reshape:
                q = g.view(qkv, (head_q, n_head, n_tok), (es * head_q, qkv.nb[1]), 0)
                k = g.view(qkv, (head_k, n_head_kv, n_tok), (es * head_k, qkv.nb[1]), es * n_embd_q)
                v = g.view(qkv, (head_v, n_head_kv, n_tok), (es * head_v, qkv.nb[1]), es * (n_embd_q + n_embd_k))
                return q, k, v
            q = g.cont(g.view(qkv, (n_embd_q, n_tok), (qkv.nb[1],), 0))
            k = g.cont(g.view(qkv, (n_embd_k, n_tok), (qkv.nb[1],), es * n_embd_q))
            v = g.cont(g.view(qkv, (head_v * n_head_kv, n_tok), (qkv.nb[1],), es * (n_embd_q + n_embd_k)))
            return q, k, v
        outs = []
        for x, head, heads in (("q", head_q, n_head), ("k", head_k, n_head_kv), ("v", head_v, n_head_kv)):
            t = self.mm(w.layer_req(il, f"attn_{x}.weight"), cur, w.layer(il, f"attn_{x}.scale"))
            bias = w.layer(il, f"attn_{x}.bias")
            if bias is not None:
                t = g.add(t, bias)
            if reshape and self.model.f_clamp_kqv > 0:
                t = g.clamp(t)
            outs.append((t, head, heads))
        if not reshape:
            return outs[0][0], outs[1][0], outs[2][0]
        q, k, v = (g.reshape(t, head, heads, n_tok) for t, head, heads in outs)
        return q, k, v

    def build_layer_ffn(self, cur: Tensor, il: int) -> Tensor:
        """The layer's own SwiGLU FFN (ffn_up, ffn_gate, ffn_down, parallel gate): llama's, and most families'."""
        w = self.w
        return self.build_ffn(
            cur, w.layer(il, "ffn_up.weight"), w.layer(il, "ffn_gate.weight"), w.layer(il, "ffn_down.weight"), il=il
        )

    def build_shared_expert(self, cur: Tensor, il: int) -> Tensor:
        """The shared expert beside routed experts (ffn_up_shexp, ffn_gate_shexp, ffn_down_shexp, parallel
        SiLU gate), as llama.cpp's MoE families build it; a gate on its output, where one has it, is theirs."""
        w = self.w
        return self.build_ffn(
            cur,
            w.layer(il, "ffn_up_shexp.weight"),
            w.layer(il, "ffn_gate_shexp.weight"),
            w.layer(il, "ffn_down_shexp.weight"),
            "silu",
            True,
            il=il,
        )

    def build_ffn(
        self,
        cur: Tensor,
        up: Tensor | None,
        gate: Tensor | None,
        down: Tensor | None,
        act: str = "silu",
        parallel: bool = True,
        up_b: Tensor | None = None,
        gate_b: Tensor | None = None,
        down_b: Tensor | None = None,
        act_scales: Tensor | None = None,
        up_s: Tensor | None = None,
        gate_s: Tensor | None = None,
        il: int = -1,
    ) -> Tensor:
        """build_ffn: act is silu, gelu, relu, relu_sqr, swiglu (fused), geglu (fused). `act_scales`
        (MPT's AWQ ffn_act.scales) divide an ungated GELU's output; `up_s` and `gate_s` (BitNet's
        per-tensor scales) multiply the projections after their biases. A layer's SwiGLU limit
        (swiglu_clamp_shexp[il], `il` given) clamps the up projection and the activated gate."""
        g = self.g
        tmp = self.mm(up, cur) if up is not None else cur
        if up_b is not None:
            tmp = g.add(tmp, up_b)
        if up_s is not None:
            tmp = g.mul(tmp, up_s)
        if gate is not None:
            cur = self.mm(gate, tmp if not parallel else cur)
            if gate_b is not None:
                cur = g.add(cur, gate_b)
            if gate_s is not None:
                cur = g.mul(cur, gate_s)
        else:
            cur = tmp
        gated_par = gate is not None and parallel
        limit = _limit(self.model.swiglu_clamp_shexp, il)
        if act == "silu" and gated_par and limit:
            if self.model.architecture in _FUSED_SWIGLU_CLAMP:  # ggml_swiglu_clamp
                cur = g.glu_split(cur, tmp)
            else:  # clamp(up) * clamp(silu(gate))
                tmp = g.clamp(tmp)
                cur = g.mul(g.clamp(g.unary(cur)), tmp)
            gated_par = False
        elif act in ("silu", "gelu", "relu"):
            if gated_par:
                cur = g.glu_split(cur, tmp)
                cur.act = act
                gated_par = False
            else:
                cur = g.unary(cur)
                cur.act = act
                if act == "gelu" and act_scales is not None:
                    cur = g.div(cur, act_scales)
        elif act == "relu_sqr":
            cur = g.sqr(g.unary(cur))
        elif act in ("swiglu", "geglu", "reglu"):
            cur = g.glu(cur)
            cur.act = {"swiglu": "silu", "geglu": "gelu", "reglu": "relu"}[act]
        else:  # pragma: no cover - guarded by the builders
            raise ValueError(f"unknown activation {act}")
        if gated_par:
            cur = g.mul(cur, tmp)
        if down is not None:
            cur = self.mm(down, cur)
        if down_b is not None:
            cur = g.add(cur, down_b)
        return cur

    def build_routed_experts(
        self,
        cur: Tensor,
        il: int,
        experts: Experts,
        *,
        shared: bool | None,
        norm_w: bool | None = None,
        exp_probs_b: Tensor | None = None,
    ) -> Tensor:
        """The routed experts as most MoE families build them (SiLU; the header's weight norm, scale
        and gating; the expert-probability bias where the layer has one), plus the shared expert:
        always (`shared` True) or where the layer has its weights (None). `norm_w` and `exp_probs_b`
        replace the header's norm and the bias's usual name where a family differs."""
        moe = self.build_moe_ffn(
            cur,
            il,
            experts.n_expert,
            experts.n_used,
            "silu",
            experts.weights_norm if norm_w is None else norm_w,
            experts.weights_scale,
            experts.gating,
            exp_probs_b=exp_probs_b or self.w.layer(il, "exp_probs_b.bias"),
        )
        if shared or (shared is None and self.w.layer(il, "ffn_up_shexp.weight") is not None):
            moe = self.g.add(moe, self.build_shared_expert(cur, il))
        return moe

    def build_moe_ffn(
        self,
        cur: Tensor,
        il: int,
        n_expert: int,
        n_expert_used: int,
        act: str = "silu",
        norm_w: bool = True,
        w_scale: float = 0.0,
        gating: str = "softmax",
        gate_inp_b: Tensor | None = None,
        exp_probs_b: Tensor | None = None,
        n_expert_groups: int = 0,
        n_group_used: int = 0,
        logits: Tensor | None = None,
        weight_before_ffn: bool = False,
        grouped_from: int = 0,
        stem: str = "exps",
    ) -> Tensor:
        """build_moe_ffn: router, top-k experts, expert matmuls, weighted sum of the experts.
        `logits` are router logits the caller computed (probs_in), e.g. from the input before a latent projection.
        `grouped_from` (GroveMoE): the router's expert count; its experts are picked by a sigmoid, and where
        the experts here are fewer (one per group), the picked ids are divided down to their group's.
        `stem` names the expert tensors (ffn_up_<stem> ...): GroveMoE's chunk experts are "chexps"."""
        g, w = self.g, self.w
        n_embd, n_tokens = cur.ne[0], cur.ne[1]
        if logits is None:
            logits = self.mm(w.layer_req(il, "ffn_gate_inp.weight"), cur)
        if gate_inp_b is not None:
            logits = g.add(logits, gate_inp_b)
        if gating == "softmax":
            probs = g.soft_max_ext(logits, None)
        elif gating == "sigmoid":
            probs = g.unary(logits)
        elif gating == "softmax_weight":
            probs = logits
        else:  # sqrt_softplus
            probs = g.sqrt(g.unary(logits))
        selection = probs
        if exp_probs_b is not None:
            selection = g.add(probs, exp_probs_b)
        if weight_before_ffn:  # llama4: top-k on the raw logits, the sigmoid only weighs the picked experts
            selection = logits
        if grouped_from:
            selection = g.unary(logits)
        if n_expert_groups > 1 and n_tokens > 0:
            per_group = n_expert // n_expert_groups
            groups = g.reshape(selection, per_group, n_expert_groups, n_tokens)
            scores = g.argsort_top_k(groups, 2)
            scores = g.get_rows(g.reshape(groups, 1, groups.ne[0], groups.ne[1], groups.ne[2]), scores)
            scores = g.sum_rows(g.reshape(scores, scores.ne[1], scores.ne[2], scores.ne[3]))
            scores = g.reshape(scores, scores.ne[1], scores.ne[2])
            expert_groups = g.argsort_top_k(scores, n_group_used)
            picked = g.get_rows(groups, expert_groups)
            filled = g.op("FILL", groups.type, groups.ne, [groups])
            selection = g.set_rows(filled, picked, expert_groups)
            selection = g.reshape(selection, n_expert, n_tokens)
        selected = g.argsort_top_k(selection, n_expert_used)
        if grouped_from and n_expert != grouped_from:  # f32, scaled by 1/experts per group, back to i32
            selected = g.cast(g.scale(g.cast(selected, F32)), I32)
        probs3 = g.reshape(probs, 1, grouped_from or n_expert, n_tokens)
        weights = g.get_rows(probs3, selected)
        if gating == "softmax_weight":
            weights = g.reshape(weights, n_expert_used, n_tokens)
            weights = g.soft_max_ext(weights, None)
            weights = g.reshape(weights, 1, n_expert_used, n_tokens)
        if norm_w:
            weights = g.reshape(weights, n_expert_used, n_tokens)
            total = g.sum_rows(weights)
            total = g.clamp(total)
            weights = g.div(weights, total)
            weights = g.reshape(weights, 1, n_expert_used, n_tokens)
        if w_scale not in (0.0, 1.0):
            weights = g.scale(weights)
        g.expand(weights)
        cur = g.reshape(cur, n_embd, 1, n_tokens)
        if weight_before_ffn:  # llama4 weighs each expert's input, not its output
            cur = g.mul(g.repeat(cur, (n_embd, n_expert_used, n_tokens, 1)), weights)
        gate_up_exps = w.layer(il, f"ffn_gate_up_{stem}.weight")
        gate_exps = w.layer(il, f"ffn_gate_{stem}.weight")
        if gate_up_exps is not None:
            gate_up = self._mm_id(gate_up_exps, cur, selected, None)
            b = w.layer(il, f"ffn_gate_up_{stem}.bias")
            if b is not None:
                gate_up = g.add_id(gate_up, b, selected)
            n_ff = gate_up.ne[0] // 2
            cur = g.view(gate_up, (n_ff, gate_up.ne[1], gate_up.ne[2]), gate_up.nb[1:3], 0)
            up = g.view(gate_up, (n_ff, gate_up.ne[1], gate_up.ne[2]), gate_up.nb[1:3], n_ff * gate_up.nb[0])
        else:
            up = self._mm_id(
                w.layer_req(il, f"ffn_up_{stem}.weight"), cur, selected, w.layer(il, f"ffn_up_{stem}.scale")
            )
            b = w.layer(il, f"ffn_up_{stem}.bias")
            if b is not None:
                up = g.add_id(up, b, selected)
            gate_s = w.layer(il, f"ffn_gate_{stem}.scale")
            cur = self._mm_id(gate_exps, cur, selected, gate_s) if gate_exps is not None else up
            b = w.layer(il, f"ffn_gate_{stem}.bias")
            if b is not None:
                cur = g.add_id(cur, b, selected)
        has_gate = gate_exps is not None or gate_up_exps is not None
        limit = _limit(self.model.swiglu_clamp_exp, il) if gate_exps is not None else 0.0
        if act == "silu" and limit:
            if self.model.architecture in _FUSED_SWIGLU_CLAMP_EXPERTS:  # ggml_swiglu_clamp
                cur = g.glu_split(cur, up)
            else:  # clamp(up) * clamp(silu(gate))
                up = g.clamp(up)
                cur = g.mul(g.clamp(g.unary(cur)), up)
        elif act in ("silu", "gelu", "relu"):
            cur = g.glu_split(cur, up) if has_gate else g.unary(cur)
            cur.act = act
        elif act == "swiglu_oai":
            cur = g.glu_split(cur, up)
        elif act == "relu_sqr":
            cur = g.sqr(g.unary(cur))
        down_s = w.layer(il, f"ffn_down_{stem}.scale")
        experts = self._mm_id(w.layer_req(il, f"ffn_down_{stem}.weight"), cur, selected, down_s)
        b = w.layer(il, f"ffn_down_{stem}.bias")
        if b is not None:
            experts = g.add_id(experts, b, selected)
        if not weight_before_ffn:
            experts = g.mul(experts, weights)
        g.expand(experts)
        views = []
        for i in range(n_expert_used):
            view = g.view(experts, (n_embd, n_tokens), (experts.nb[2],), i * experts.nb[1])
            g.expand(view)
            views.append(view)
        out = views[0]
        for view in views[1:]:
            out = g.add(out, view)
            g.expand(out)
        if n_expert_used == 1:
            out = g.cont(out)
        return out

    def _mm_id(self, weight: Tensor, cur: Tensor, ids: Tensor, scale: Tensor | None) -> Tensor:
        """build_lora_mm_id: the experts' matmul, times each picked expert's scale when the file has one
        (ffn_*_exps.scale, one value per expert, repeated over the tokens and gathered by id)."""
        g = self.g
        res = g.mul_mat_id(weight, cur, ids)
        if scale is None:
            return res
        s = g.reshape(scale, 1, scale.ne[0], 1)
        s = g.repeat(s, (1, scale.ne[0], cur.ne[2], 1))
        return g.mul(res, g.get_rows(s, ids))

    # -- attention -------------------------------------------------------------------------

    def build_attn_inp_kv(self, swa: bool = False) -> dict[str, Tensor | None]:
        """Inputs of one KV cache: k/v row indices, mask and Hadamard rotations."""
        s = self.shape
        g = self.g
        n_tok = self.n_tokens
        k_idxs = g.input(I64, (n_tok,), "attn_inp_k_idxs")
        v_rows = n_tok if not s.v_trans else n_tok * self.model.n_embd_v_gqa_max
        v_idxs = g.input(I64, (v_rows,), "attn_inp_v_idxs")
        n_stream_mask = 1 if s.kv_unified else s.n_seqs
        mask_type = F16 if s.flash_attn else F32
        n_kv = s.n_kv_swa if swa else s.n_kv
        mask = g.input(mask_type, (n_kv, n_tok // n_stream_mask, 1, n_stream_mask), "attn_inp_kq_mask")
        k_rot = v_rot = None
        head_k, head_v = self._uniform_head_dims(swa)
        if head_k > 0 and s.type_k.is_quantized and self.model.layers[0].head_dim_k % 64 == 0:
            nrot = 64
            while head_k % (nrot * 2) == 0:
                nrot *= 2
            k_rot = g.input(F32, (nrot, nrot), "attn_inp_k_rot")
        if head_v > 0 and s.type_v.is_quantized and self.model.layers[0].head_dim_v % 64 == 0:
            v_rot = g.input(F32, (64, 64), "attn_inp_v_rot")
        return {"k_idxs": k_idxs, "v_idxs": v_idxs, "mask": mask, "k_rot": k_rot, "v_rot": v_rot}

    def build_attn_inp_k(self) -> dict[str, Tensor | None]:
        """build_attn_inp_k: a K-only cache (MLA), so no V indices."""
        inp = self.build_attn_inp_kv()
        inp["v_idxs"] = None
        inp["v_rot"] = None
        return inp

    def build_attn_k(
        self,
        inp: dict[str, Tensor | None],
        layer: LayerAnatomy,
        wo: Tensor | None,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        v_mla: Tensor | None = None,
    ) -> Tensor:
        """build_attn for a K-only cache: V is a view of the cached K (its first v.ne[0] values)."""
        g = self.g
        g.expand(q)
        g.expand(v)
        g.expand(k)
        k_cache, _ = self.kv_cache_tensors(layer, False)
        g.expand(self.cpy_k(k_cache, k, inp["k_idxs"]))
        kv = self.get_k(k_cache, layer, self.shape.n_kv)
        vv = g.view(kv, (v.ne[0], kv.ne[1], kv.ne[2], kv.ne[3]), kv.nb[1:], 0)
        cur = self.build_attn_mha(q, kv, vv, None, inp["mask"], None, v_mla=v_mla)
        if wo is not None:
            cur = self.mm(wo, cur)
        return cur

    def build_attn_inp_no_cache(self) -> Tensor:
        """build_attn_inp_no_cache: the mask of attention over the micro-batch alone (no KV cache read)."""
        mask_type = F16 if self.shape.flash_attn else F32
        return self.g.input(mask_type, (self.n_tokens, self.n_tokens, 1, 1), "attn_inp_kq_mask")

    def build_attn_no_cache(
        self, mask: Tensor, wo: Tensor | None, wo_b: Tensor | None, q: Tensor, k: Tensor, v: Tensor
    ) -> Tensor:
        """build_attn without a cache (llm_graph_input_attn_no_cache): Q, K and V of the micro-batch only."""
        g = self.g
        g.expand(q)
        g.expand(k)
        g.expand(v)
        cur = self.build_attn_mha(q, k, v, None, mask, None)
        if wo is not None:
            cur = self.mm(wo, cur)
        if wo_b is not None:
            cur = g.add(cur, wo_b)
        return cur

    def _uniform_head_dims(self, swa: bool) -> tuple[int, int]:
        """n_embd_head_k_all / _v_all of one cache: the head size if all its layers agree, else -1."""
        layers = [layer for layer in self.model.kv_layers if layer.is_swa == swa]
        if not layers:
            return 0, 0
        ks = {layer.head_dim_k for layer in layers}
        vs = {layer.head_dim_v for layer in layers}
        return (ks.pop() if len(ks) == 1 else -1), (vs.pop() if len(vs) == 1 else -1)

    def hadamard(self, cur: Tensor, rot: Tensor) -> Tensor:
        g = self.g
        n = rot.ne[0]
        res = (
            g.cont(cur, (n, cur.n_elements() // n, 1, 1))
            if not cur.is_contiguous()
            else g.reshape(cur, n, cur.n_elements() // n)
        )
        res = g.mul_mat(rot, res)
        return g.reshape(res, *cur.ne)

    def kv_cache_tensors(self, layer: LayerAnatomy, swa: bool) -> tuple[Tensor, Tensor | None]:
        return self.w.kv(layer.index, swa)

    def build_plain_attn(
        self,
        inp: dict[str, Tensor | None],
        layer: LayerAnatomy,
        cur: Tensor,
        pos: Tensor | None,
        wo_b: Tensor | None = None,
        freqs: Tensor | None = None,
    ) -> Tensor:
        """Q/K/V, RoPE when the model has positions, attention: the block many builders share."""
        hd = layer.head_dim_k
        q, k, v = self.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        if pos is not None:
            q = self.g.rope(q, pos, freqs)
            k = self.g.rope(k, pos, freqs)
        return self.build_attn(inp, layer, self.w.layer(layer.index, "attn_output.weight"), wo_b, q, k, v)

    def build_attn(
        self,
        inp: dict[str, Tensor | None],
        layer: LayerAnatomy,
        wo: Tensor | None,
        wo_b: Tensor | None,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        kq_b: Tensor | None = None,
        sinks: Tensor | None = None,
        iswa: bool = False,
        softcap: bool = False,
    ) -> Tensor:
        g, s = self.g, self.shape
        k_rot, v_rot = inp["k_rot"], inp["v_rot"]
        if k_rot is not None:
            q = self.hadamard(q, k_rot)
            k = self.hadamard(k, k_rot)
        if v_rot is not None:
            v = self.hadamard(v, v_rot)
        if iswa:
            g.expand(q)
            g.expand(k)
            g.expand(v)
        else:
            g.expand(q)
            g.expand(v)
            g.expand(k)
        k_cache, v_cache = self.kv_cache_tensors(layer, layer.is_swa and iswa)
        g.expand(self.cpy_k(k_cache, k, inp["k_idxs"]))
        assert v_cache is not None
        g.expand(self.cpy_v(v_cache, v, inp["v_idxs"]))
        n_kv = s.n_kv_swa if (iswa and layer.is_swa) else s.n_kv
        kv = self.get_k(k_cache, layer, n_kv)
        vv = self.get_v(v_cache, layer, n_kv)
        cur = self.build_attn_mha(q, kv, vv, kq_b, inp["mask"], sinks, softcap=softcap)
        if v_rot is not None:
            cur = self.hadamard(cur, v_rot)
        if wo is not None:
            cur = self.mm(wo, cur, self.w.layer(layer.index, "attn_output.scale"))
        if wo_b is not None:
            cur = g.add(cur, wo_b)
        return cur

    def cpy_k(self, k_cache: Tensor, k_cur: Tensor, k_idxs: Tensor | None) -> Tensor:
        g = self.g
        n_embd_gqa = k_cur.ne[0] * k_cur.ne[1]
        k_view = g.view(k_cur, (n_embd_gqa, k_cur.ne[2]), (k_cur.nb[2],), 0)
        dst = k_cache
        if k_cache.ne[2] > 1:
            dst = g.reshape(k_cache, n_embd_gqa, k_cache.ne[1] * k_cache.ne[2])
        assert k_idxs is not None
        return g.set_rows(dst, k_view, k_idxs)

    def cpy_v(self, v_cache: Tensor, v_cur: Tensor, v_idxs: Tensor | None) -> Tensor:
        g = self.g
        n_embd_gqa = v_cur.ne[0] * v_cur.ne[1]
        n_tok = v_cur.ne[2]
        assert v_idxs is not None
        if not self.shape.v_trans:
            v_view = g.view(v_cur, (n_embd_gqa, n_tok), (v_cur.nb[2],), 0)
            dst = v_cache
            if v_cache.ne[2] > 1:
                dst = g.reshape(v_cache, n_embd_gqa, v_cache.ne[1] * v_cache.ne[2])
            return g.set_rows(dst, v_view, v_idxs)
        if row_size(v_cur.type, n_embd_gqa) == v_cur.nb[2]:
            v2 = g.reshape(v_cur, n_embd_gqa, n_tok)
        else:
            v2 = g.cont(v_cur, (n_embd_gqa, n_tok, 1, 1))
        if n_embd_gqa < v_cache.ne[0]:
            v2 = g.pad(v2, v_cache.ne[0] - n_embd_gqa)
        v_view = g.reshape(v_cache, 1, v_cache.n_elements())
        v2 = g.reshape(v2, 1, v2.n_elements())
        return g.set_rows(v_view, v2, v_idxs)

    def get_k(self, k_cache: Tensor, layer: LayerAnatomy, n_kv: int) -> Tensor:
        t = k_cache.type
        kv_size = k_cache.ne[1]
        n_embd_k_gqa = k_cache.ne[0]
        ns = k_cache.ne[2]
        return self.g.view(
            k_cache,
            (layer.head_dim_k, layer.n_head_kv, n_kv, ns),
            (row_size(t, layer.head_dim_k), row_size(t, n_embd_k_gqa), row_size(t, n_embd_k_gqa * kv_size)),
            0,
        )

    def get_v(self, v_cache: Tensor, layer: LayerAnatomy, n_kv: int) -> Tensor:
        t = v_cache.type
        kv_size = v_cache.ne[1]
        n_embd_v_gqa = v_cache.ne[0]
        ns = v_cache.ne[2]
        if not self.shape.v_trans:
            return self.g.view(
                v_cache,
                (layer.head_dim_v, layer.n_head_kv, n_kv, ns),
                (row_size(t, layer.head_dim_v), row_size(t, n_embd_v_gqa), row_size(t, n_embd_v_gqa * kv_size)),
                0,
            )
        view = self.g.view(
            v_cache,
            (n_kv, layer.n_head_kv, layer.head_dim_v, ns),
            (row_size(t, kv_size * layer.head_dim_v), row_size(t, kv_size), row_size(t, kv_size * n_embd_v_gqa)),
            0,
        )
        return view

    def build_attn_mha(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        kq_b: Tensor | None,
        mask: Tensor | None,
        sinks: Tensor | None,
        v_mla: Tensor | None = None,
        softcap: bool = False,
    ) -> Tensor:
        g = self.g
        v_trans = v.nb[1] > v.nb[2]
        n_stream = k.ne[3]
        q = g.view(
            q, (q.ne[0], q.ne[1], q.ne[2] // n_stream, n_stream), (q.nb[1], q.nb[2], q.nb[2] * (q.ne[2] // n_stream)), 0
        )
        q = g.permute(q, 0, 2, 1, 3)
        k = g.permute(k, 0, 2, 1, 3)
        v = g.permute(v, 0, 2, 1, 3)
        if self.shape.flash_attn and kq_b is None:
            if v_trans:
                v = g.transpose(v)
            if k.type is F32:
                k = g.cast(k, F16)
            if v.type is F32:
                v = g.cast(v, F16)
            cur = g.flash_attn_ext(q, k, v, mask, sinks)
            if v_mla is not None:
                cur = g.permute(cur, 0, 2, 1, 3)
                cur = g.mul_mat(v_mla, cur)
                cur = g.permute(cur, 0, 2, 1, 3)
                cur = g.cont(cur)
            cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        else:
            kq = g.mul_mat(k, q)
            if softcap:
                kq = g.scale(kq)
                kq = g.unary(kq)
                kq = g.scale(kq)
            if kq_b is not None:
                kq = g.add(kq, kq_b)
            kq = g.soft_max_ext(kq, mask, sinks)
            if not v_trans:
                v = g.cont(g.transpose(v))
            kqv = g.mul_mat(v, kq)
            if v_mla is not None:
                kqv = g.mul_mat(v_mla, kqv)
            cur = g.permute(kqv, 0, 2, 1, 3)
            cur = g.cont(cur, (cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3], 1, 1))
        g.expand(cur)
        return cur

    # -- recurrent state -------------------------------------------------------------------

    def build_rs_inp(self) -> dict[str, Tensor]:
        """build_rs_inp: the state-copy indices (all states at reserve time)."""
        g = self.g
        n_rs, n_seqs = self.shape.n_rs, self.shape.n_seqs
        s_copy = g.input(I32, (n_rs,), "rs_s_copy")
        main = g.view(s_copy, (n_seqs,), (), 0)
        extra = g.view(s_copy, (n_rs - n_seqs,), (), n_seqs * s_copy.nb[0])
        return {"s_copy": s_copy, "main": main, "extra": extra}

    def build_rs(
        self,
        inp: dict[str, Tensor],
        s: Tensor,
        state_size: int,
        n_seqs: int,
        get_rows: Callable[[Tensor, Tensor], Tensor] | None = None,
    ) -> Tensor:
        """llm_graph_context::build_rs: zero a state, gather the sequences' states, keep the others."""
        g = self.g
        n_rs = self.shape.n_rs
        states = g.reshape(s, state_size, s.ne[1])
        zero = g.view(states, (state_size,), (), 0)
        g.expand(g.scale_inplace(zero))
        out = get_rows(states, inp["main"]) if get_rows is not None else g.get_rows(states, inp["main"])
        g.expand(out)
        extra = g.get_rows(states, inp["extra"])
        dst = g.view(s, (state_size, n_rs - n_seqs), (s.nb[1],), n_seqs * s.nb[1])
        g.expand(g.cpy(extra, dst))
        return out

    # -- outputs ---------------------------------------------------------------------------

    def set_outputs(self, embd: Tensor, logits: Tensor | None) -> None:
        self.t_embd, self.t_logits = embd, logits
        embd.flags |= FLAG_OUTPUT
        if logits is not None:
            logits.flags |= FLAG_OUTPUT
            self.g.expand(logits)
        else:
            self.g.expand(embd)

    def output_weight(self) -> Tensor:
        """model.output, or the token embeddings when the output is tied to them."""
        out = self.w.get_optional("output.weight")
        return out if out is not None else self.w.get("token_embd.weight", duplicate=True)


class WeightSet:
    """Weight and cache tensors as graph leaves, created on first use."""

    def __init__(
        self,
        model: ModelAnatomy,
        kv: dict[tuple[int, bool], tuple[Tensor, Tensor | None]],
        graph: Graph,
        locate: Callable[[str, bool], tuple[str, bool]] | None = None,
        layer_device: Callable[[int], str] | None = None,
    ) -> None:
        """`locate(name, duplicate)` gives a weight's backend ("host" or a GPU name) and whether
        a host weight sits in a plain host buffer (not CPU_REPACK); `layer_device(il)` a layer's backend."""
        self.model = model
        self._locate = locate or (lambda name, dup: ("host", True))
        self._layer_device = layer_device
        self._rs: dict[int, tuple[Tensor, Tensor]] = {}
        self._lid: dict[int, Tensor] = {}
        self._kv = kv
        self._cache: dict[tuple[str, bool], Tensor] = {}
        self._g = graph
        self._infos = {}
        for group in (model.input_tensors, model.output_tensors, model.other_tensors):
            for info in group:
                self._infos[info.name] = info
        for layer in model.layers:
            for info in layer.tensors:
                self._infos[info.name] = info

    def get_optional(self, name: str, duplicate: bool = False) -> Tensor | None:
        key = (name, duplicate)
        tensor = self._cache.get(key)
        if tensor is None:
            info = self._infos.get(name)
            if info is None:
                return None
            backend, host_plain = self._locate(name, duplicate)
            tensor = self._g.weight(info.type, info.shape, name, backend=backend, host_plain=host_plain)
            self._cache[key] = tensor
        return tensor

    def get(self, name: str, duplicate: bool = False) -> Tensor:
        tensor = self.get_optional(name, duplicate)
        if tensor is None:
            raise ModelError(
                self.model.path,
                f"required tensor {name!r} is missing: not a complete "
                f"{self.model.architecture} model (llama.cpp would refuse it)",
            )
        return tensor

    def layer(self, il: int, suffix: str) -> Tensor | None:
        return self.get_optional(f"blk.{il}.{suffix}")

    def rope_freqs(self, il: int, name: str = "rope_freqs.weight") -> Tensor | None:
        """The RoPE frequency factors layer `il` reads (rope_freqs, or rope_factors_long): llama.cpp creates them
        for each layer that uses them (TENSOR_DUPLICATED past the first), each on its layer's device
        (llama_model::get_rope_factors), so a layer on a GPU reads a copy there, not one in host memory (which
        would cut the graph in one more split)."""
        info = self._infos.get(name)
        if info is None or self._layer_device is None:
            return self.get_optional(name)
        where = self._layer_device(il)
        key = (f"{name}@{where}", False)
        tensor = self._cache.get(key)
        if tensor is None:
            tensor = self._g.weight(info.type, info.shape, name, backend=where, host_plain=True)
            self._cache[key] = tensor
        return tensor

    def layer_req(self, il: int, suffix: str) -> Tensor:
        return self.get(f"blk.{il}.{suffix}")

    def kv(self, il: int, swa: bool) -> tuple[Tensor, Tensor | None]:
        return self._kv[(il, swa)]

    def lid(self, il: int) -> Tensor:
        """The sparse-attention indexer's key cache of a layer."""
        return self._lid[il]

    def rs(self, il: int) -> tuple[Tensor, Tensor]:
        """The recurrent state tensors (r, s) of a layer."""
        return self._rs[il]

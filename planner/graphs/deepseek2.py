"""DeepSeek-V2/V3 (deepseek2): multi-head latent attention and routed experts with shared ones.

With MLA (key_length_mla in the header) the KV cache holds only the compressed
latent plus the RoPE part of K; V is a view of that same cache, and the value
projection is applied after attention (v_mla).
"""

from __future__ import annotations

from planner.ggml_graph import F32, row_size
from planner.graphs.context import GraphContext


def build_deepseek2(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    x = m.extra
    is_mla = x.get("mla", False)
    hd_k, hd_v = x["head_k_mla"], x["head_v_mla"]
    rope = m.rope_dims
    nope = hd_k - rope
    kv_lora = x["n_lora_kv"]
    n_tok = ctx.n_tokens
    inp_l = ctx.build_inp_embd()
    attn_scale = g.input(F32, (1, 1, n_tok), "inp_attn_scale") if x.get("f_attn_temp_scale") else None
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_k() if is_mla else ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        n_head = layer.n_head
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        if w.layer(il, "attn_q_a.weight") is not None:
            q = g.mul_mat(w.layer_req(il, "attn_q_a.weight"), cur)
            q = ctx.build_norm(q, w.layer(il, "attn_q_a_norm.weight"), il=il)
            q = g.mul_mat(w.layer_req(il, "attn_q_b.weight"), q)
        else:
            q = g.mul_mat(w.layer_req(il, "attn_q.weight"), cur)
        q = g.reshape(q, hd_k, n_head, n_tok)
        kv_pe = g.mul_mat(w.layer_req(il, "attn_kv_a_mqa.weight"), cur)
        stride = row_size(kv_pe.type, kv_lora + rope)
        kv_cmpr = g.view(kv_pe, (kv_lora, n_tok), (stride,), 0)
        k_pe = g.view(kv_pe, (rope, 1, n_tok), (stride, stride), row_size(kv_pe.type, kv_lora))
        k_pe = g.rope(k_pe, inp_pos)
        kv_cmpr = ctx.build_norm(kv_cmpr, w.layer(il, "attn_kv_a_norm.weight"), il=il)
        if is_mla:
            q_nope = g.view(q, (nope, n_head, n_tok), (q.nb[1], q.nb[2]), 0)
            q_pe = g.view(q, (rope, n_head, n_tok), (q.nb[1], q.nb[2]), row_size(q.type, nope))
            q_pe = g.rope(q_pe, inp_pos)
            q_nope = g.permute(q_nope, 0, 2, 1, 3)
            q_abs = g.mul_mat(w.layer_req(il, "attn_k_b.weight"), q_nope)
            q_abs = g.permute(q_abs, 0, 2, 1, 3)
            q_cur = g.concat(q_abs, q_pe, 0)
            kv_cmpr = g.reshape(kv_cmpr, kv_lora, 1, n_tok)
            k_cur = g.concat(kv_cmpr, k_pe, 0)
            v_cur = kv_cmpr
            if attn_scale is not None:
                q_cur = g.mul(q_cur, attn_scale)
            cur = ctx.build_attn_k(
                inp_attn,
                layer,
                w.layer(il, "attn_output.weight"),
                q_cur,
                k_cur,
                v_cur,
                v_mla=w.layer_req(il, "attn_v_b.weight"),
            )
        else:
            kv = g.mul_mat(w.layer_req(il, "attn_kv_b.weight"), kv_cmpr)
            stride_kv = row_size(kv.type, nope + hd_v)
            k_nope = g.view(kv, (nope, n_head, n_tok), (stride_kv, stride_kv * n_head), 0)
            v_cur = g.view(kv, (hd_v, n_head, n_tok), (stride_kv, stride_kv * n_head), row_size(kv.type, nope))
            v_cur = g.cont(v_cur)
            q_cur = g.rope(q, inp_pos)
            k_cur = g.concat(k_nope, g.repeat(k_pe, (rope, n_head, n_tok, 1)), 0)
            if attn_scale is not None:
                q_cur = g.mul(q_cur, attn_scale)
            cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q_cur, k_cur, v_cur)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if il < x.get("n_layer_dense_lead", 0):
            cur = ctx.build_ffn(
                cur,
                w.layer(il, "ffn_up.weight"),
                w.layer(il, "ffn_gate.weight"),
                w.layer(il, "ffn_down.weight"),
                "silu",
                True,
            )
        else:
            gating = {1: "softmax", 2: "sigmoid", 3: "softmax_weight", 4: "sqrt_softplus"}.get(
                x.get("expert_gating_func", 1), "softmax"
            )
            moe = ctx.build_moe_ffn(
                cur,
                il,
                x["n_expert"],
                x["n_expert_used"],
                "silu",
                norm_w=x.get("expert_weights_norm", False),
                w_scale=x.get("expert_weights_scale", 0.0),
                gating=gating,
                exp_probs_b=w.layer(il, "exp_probs_b.bias"),
                n_expert_groups=x.get("n_expert_groups", 0),
                n_group_used=x.get("n_group_used", 0),
            )
            shared = ctx.build_ffn(
                cur,
                w.layer(il, "ffn_up_shexp.weight"),
                w.layer(il, "ffn_gate_shexp.weight"),
                w.layer(il, "ffn_down_shexp.weight"),
                "silu",
                True,
            )
            cur = g.add(moe, shared)
        inp_l = g.add(cur, ffn_inp)
    cur = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    ctx.set_outputs(cur, g.mul_mat(ctx.output_weight(), cur))

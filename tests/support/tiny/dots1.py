"""Tiny models of dots.llm1 and its look-alikes (planner.archs.dots1): Ling (bailingmoe, bailingmoe2),
Mellum, Hy V3. Per-head Q/K norms, a dense FFN in the leading layers, routed plus shared experts elsewhere."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attn_output, fused_qkv, nextn, norm, output_norm, qkv

global_tensors = output_norm


def _qk_norms(spec: TinySpec, il: int, k_first: bool) -> Shapes:
    p, hk = f"blk.{il}.", spec.head_k
    q: Shapes = [(p + "attn_q_norm.weight", (hk,), Q.F32)]
    k: Shapes = [(p + "attn_k_norm.weight", (hk,), Q.F32)]
    return k + q if k_first else q + k


def _ffn(spec: TinySpec, il: int, shared: int) -> Shapes:
    """A dense FFN (gate, down, up) in the leading layers, else the router, experts and shared expert."""
    e, w, p = spec.n_embd, spec.weight_type, f"blk.{il}."
    if il < spec.count("leading_dense_block_count", 0):
        ff = spec.n_ff
        return [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
            (p + "ffn_up.weight", (e, ff), w),
        ]
    ne, fe = spec.n_expert, spec.n_ff_exp
    out: Shapes = [(p + "ffn_gate_inp.weight", (e, ne), Q.F32)]
    if spec.arch in ("dots1", "bailingmoe2"):  # an optional selection bias
        out.append((p + "exp_probs_b.bias", (ne,), Q.F32))
    out += [
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
    ]
    if shared:
        out += [
            (p + "ffn_gate_shexp.weight", (e, shared), w),
            (p + "ffn_down_shexp.weight", (shared, e), w),
            (p + "ffn_up_shexp.weight", (e, shared), w),
        ]
    return out


def _hy_v3(spec: TinySpec, il: int) -> Shapes:
    """Hy V3's block (the same in its multi-token-prediction layers, which add their own tensors)."""
    e, w, p, ne, fe = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_expert, spec.n_ff_exp
    fs = spec.n_ff_shexp or fe
    out = norm(spec, il, "attn_norm") + qkv(spec, il) + attn_output(spec, il) + _qk_norms(spec, il, k_first=False)
    out += norm(spec, il, "ffn_norm") + [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "exp_probs_b", (ne,), Q.F32),  # named without a suffix by this loader
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_gate_shexp.weight", (e, fs), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
    ]
    return out + nextn(spec, il) if il >= spec.n_layer - spec.count("nextn_predict_layers", 0) else out


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    a = spec.arch
    if a == "hy_v3":
        return _hy_v3(spec, il)
    n_shared = spec.count("expert_shared_count", 0)
    if a == "bailingmoe2":  # a fused QKV, Q/K norms; the multi-token-prediction layers' extra tensors
        mtp = il >= spec.n_layer - spec.count("nextn_predict_layers", 0)
        out = norm(spec, il, "attn_norm") + fused_qkv(spec, il) + attn_output(spec, il)
        out += _qk_norms(spec, il, k_first=False) + norm(spec, il, "ffn_norm")
        out += _ffn(spec, il, (spec.n_ff_shexp or spec.n_ff_exp) * n_shared)
        if mtp:
            out += nextn(spec, il) + norm(spec, il, "layer_output_norm")
        return out
    out = norm(spec, il, "attn_norm") + qkv(spec, il) + attn_output(spec, il)
    if a != "bailingmoe":
        out += _qk_norms(spec, il, k_first=True)
    out += norm(spec, il, "ffn_norm")
    return out + _ffn(spec, il, spec.n_ff_exp * n_shared if a != "mellum" else 0)


ZOO: dict[str, TinySpec] = {
    # a leading dense layer, then sigmoid-routed experts with a selection bias and a shared expert
    "dots1": TinySpec(
        "dots1",
        n_head_kv=4,  # K and V as wide as Q (the loader's shapes)
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "dots1.leading_dense_block_count": 1,
            "dots1.expert_shared_count": 2,
            "dots1.expert_gating_func": 2,
            "dots1.expert_weights_norm": True,
            "dots1.expert_weights_scale": 2.5,
        },
    ),
    # Ling: experts on every layer, softmax routing, two shared experts, no Q/K norms
    "bailingmoe": TinySpec(
        "bailingmoe",
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        extra_kv={"bailingmoe.expert_shared_count": 2, "bailingmoe.expert_weights_norm": True},
    ),
    # Ling 2: a fused QKV, a leading dense layer, sigmoid routing with a bias, a wider shared expert and
    # one multi-token-prediction layer (skipped)
    "bailingmoe2": TinySpec(
        "bailingmoe2",
        n_layer=5,
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=96,
        weight_type=Q.Q8_0,
        extra_kv={
            "bailingmoe2.leading_dense_block_count": 1,
            "bailingmoe2.nextn_predict_layers": 1,
            "bailingmoe2.expert_shared_count": 1,
            "bailingmoe2.expert_gating_func": 2,
            "bailingmoe2.expert_weights_norm": True,
            "bailingmoe2.expert_weights_scale": 2.5,
        },
    ),
    # Hy V3: sigmoid routing by default with a selection bias, a wider shared expert, one multi-token-
    # prediction layer (skipped), tied output
    "hy_v3": TinySpec(
        "hy_v3",
        n_layer=5,
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=96,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={"hy_v3.nextn_predict_layers": 1, "hy_v3.expert_weights_norm": True},
    ),
    # Mellum: a window on 3 of every 4 layers, softmax-routed experts only
    "mellum": TinySpec(
        "mellum", n_layer=5, n_head_kv=2, n_swa=128, n_expert=8, n_expert_used=2, n_ff_exp=64, weight_type=Q.Q8_0
    ),
}

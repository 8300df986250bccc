"""Tiny models of PLaMo 3 (planner.archs.plamo3): a fused QKV projection, per-head Q/K norms, sandwich
norms named without ".weight" (as llama_model_plamo3::load_arch_tensors asks for them), a fused
SwiGLU FFN."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, fused_qkv, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    return [
        *norm(spec, il, "attn_norm"),
        *fused_qkv(spec, il),
        (p + "attn_q_norm.weight", (hk,), Q.F32),
        (p + "attn_k_norm.weight", (hk,), Q.F32),
        (p + "attn_output.weight", (hk * spec.n_head, e), w),
        (p + "post_attention_norm", (e,), Q.F32),
        *norm(spec, il, "ffn_norm"),
        (p + "post_ffw_norm", (e,), Q.F32),
        (p + "ffn_up.weight", (e, 2 * spec.n_ff), w),
        (p + "ffn_down.weight", (spec.n_ff, e), w),
    ]


ZOO: dict[str, TinySpec] = {
    # 7 of every 8 layers windowed (the default pattern), tied output
    "plamo3": TinySpec("plamo3", n_layer=8, n_head_kv=2, n_swa=128, output_type=None),
    # no window in the header: every layer attends to the whole context
    "plamo3-full": TinySpec("plamo3", n_head_kv=1, head_dim=64, weight_type=Q.Q8_0),
}

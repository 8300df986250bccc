"""Tiny models of Muse Glimmer (planner.archs.muse_glimmer): Q/K norms, an attention output gate,
sandwich norms and a SwiGLU FFN, in llama_model_muse_glimmer::load_arch_tensors' order."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attn_output, gated_ffn, norm, output_norm, qkv

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    gate, up, down = gated_ffn(spec, il)
    return [
        *norm(spec, il, "attn_norm"),
        *norm(spec, il, "post_attention_norm"),
        *qkv(spec, il),
        *attn_output(spec, il),
        (p + "attn_q_norm.weight", (hk,), Q.F32),
        (p + "attn_k_norm.weight", (hk,), Q.F32),
        (p + "attn_gate.weight", (e, hk * spec.n_head), w),
        *norm(spec, il, "ffn_norm"),
        *norm(spec, il, "post_ffw_norm"),
        gate,
        down,
        up,
    ]


ZOO: dict[str, TinySpec] = {
    # [local x3, global]: 16 query heads sharing 2 KV heads, a 128-token window, soft-capped logits
    "muse-glimmer": TinySpec(
        "muse-glimmer",
        n_layer=8,
        n_head=8,
        n_head_kv=2,
        head_dim=32,
        n_swa=128,
        extra_kv={"muse-glimmer.logit_scale": 0.5, "muse-glimmer.final_logit_softcapping": 30.0},
    ),
}

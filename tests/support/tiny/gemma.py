"""Tiny models of Gemma 1 to 3 (planner.archs.gemma): sandwich norms from Gemma 2 on, Q/K norms in Gemma 3."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm, qk_norm_attention

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    sandwich = spec.arch in ("gemma2", "gemma3")  # post-norms after attention and FFN
    out = norm(spec, il, "attn_norm")
    out += qk_norm_attention(spec, il) if spec.arch == "gemma3" else attention(spec, il)
    if sandwich:
        out += norm(spec, il, "post_attention_norm")
    out += norm(spec, il, "ffn_norm") + gated_ffn(spec, il)
    return out + norm(spec, il, "post_ffw_norm") if sandwich else out


def header_kv(spec: TinySpec) -> dict[str, object]:
    """Gemma 2's soft caps on the attention and final logits."""
    if spec.arch != "gemma2":
        return {}
    return {"gemma2.attn_logit_softcapping": 50.0, "gemma2.final_logit_softcapping": 30.0}


ZOO: dict[str, TinySpec] = {
    "gemma": TinySpec("gemma", n_head_kv=1, output_type=None, n_vocab=2048),
    "gemma2": TinySpec("gemma2", n_swa=256, output_type=None, n_layer=4),
    "gemma3": TinySpec(
        "gemma3",
        n_layer=6,
        n_swa=512,
        head_dim=64,
        n_head_kv=1,
        output_type=None,
        weight_type=Q.Q4_0,
        embd_type=Q.Q8_0,
        n_vocab=4096,
    ),
}

"""Tiny models of OLMo 2 / Olmo 3 and EXAONE 4 (planner.archs.olmo2): no pre-norms, Q/K norms (per head in
EXAONE 4) and post-norms."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    hk, p = spec.head_k, f"blk.{il}."
    qn, kn = (hk * spec.n_head, hk * spec.n_head_kv) if spec.arch == "olmo2" else (hk, hk)
    qk_norms: Shapes = [(p + "attn_q_norm.weight", (qn,), Q.F32), (p + "attn_k_norm.weight", (kn,), Q.F32)]
    attn = attention(spec, il) + qk_norms + norm(spec, il, "post_attention_norm")
    return attn + gated_ffn(spec, il) + norm(spec, il, "post_ffw_norm")


ZOO: dict[str, TinySpec] = {
    "olmo2": TinySpec("olmo2", n_head_kv=4, weight_type=Q.Q8_0),
    "olmo3": TinySpec("olmo2", n_head_kv=2, n_swa=256, n_layer=8),  # Olmo 3: 3 of 4 layers windowed
    "exaone4": TinySpec("exaone4", n_head_kv=2, weight_type=Q.Q8_0),
    # the 64-layer shape is the one llama.cpp gives windowed layers (3 of 4, RoPE on those only)
    "exaone4-swa": TinySpec("exaone4", n_head_kv=2, n_swa=256, n_layer=64, n_ff=128),
}

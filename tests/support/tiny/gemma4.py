"""Tiny models of Gemma 4's text model (planner.archs.gemma4): gemma3's attention with a per-layer head
size, the per-layer input gate and an output scale; layers sharing an earlier layer's cache have no K/V."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, gated_ffn, norm, output_norm
from tests.support.tiny.gemma3n import per_layer_embeddings, per_layer_input

# Gemma 4's tiny layout: which layers use the sliding window (the header carries it as a per-layer array),
# their head size beside the global layers' one, and the per-layer-embedding width
GEMMA4_SWA = (True, True, True, False, True, False)
GEMMA4_HEAD_SWA, GEMMA4_EMBD_PER_LAYER = 64, 64


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    """A Gemma 4 block (llama_model_gemma4::load_arch_tensors); no V projection in layer 3: V is K."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    hk = GEMMA4_HEAD_SWA if GEMMA4_SWA[il] else spec.head_k
    q_dim, kv_dim = hk * spec.n_head, hk * spec.n_head_kv
    owns_kv = il < spec.n_layer - spec.count("attention.shared_kv_layers", 0)
    out = norm(spec, il, "attn_norm") + [(p + "attn_q.weight", (e, q_dim), w)]
    if owns_kv:
        out.append((p + "attn_k.weight", (e, kv_dim), w))
        if il != 3:
            out.append((p + "attn_v.weight", (e, kv_dim), w))
        out.append((p + "attn_k_norm.weight", (hk,), f32))
    out += [(p + "attn_output.weight", (q_dim, e), w), (p + "attn_q_norm.weight", (hk,), f32)]
    out += norm(spec, il, "post_attention_norm") + [(p + "layer_output_scale.weight", (1,), f32)]
    out += norm(spec, il, "ffn_norm") + gated_ffn(spec, il) + norm(spec, il, "post_ffw_norm")
    return out + per_layer_input(spec, il, GEMMA4_EMBD_PER_LAYER)


def global_tensors(spec: TinySpec) -> Shapes:
    """Gemma 4's tensors outside the blocks: the per-layer embeddings and the global layers' RoPE factors."""
    rope_freqs: Shapes = [("rope_freqs.weight", (spec.head_k // 2,), Q.F32)]
    return per_layer_embeddings(spec, GEMMA4_EMBD_PER_LAYER) + rope_freqs + output_norm(spec)


ZOO: dict[str, TinySpec] = {
    # 6 layers, windowed but for layers 3 and 5 (64-value heads, 128 in the global layers); the last two
    # read layer 2's (windowed) or layer 3's (global) cache; per-layer embeddings, layer 3 without attn_v
    "gemma4": TinySpec(
        "gemma4",
        n_layer=6,
        n_head=2,
        n_head_kv=1,
        head_dim=128,
        n_swa=256,
        output_type=None,
        weight_type=Q.Q4_0,
        embd_type=Q.Q8_0,
        name="tiny-gemma-4",
        extra_kv={
            "gemma4.attention.sliding_window_pattern": list(GEMMA4_SWA),
            "gemma4.attention.shared_kv_layers": 2,
            "gemma4.attention.key_length_swa": GEMMA4_HEAD_SWA,
            "gemma4.attention.value_length_swa": GEMMA4_HEAD_SWA,
            "gemma4.embedding_length_per_layer_input": GEMMA4_EMBD_PER_LAYER,
            "gemma4.final_logit_softcapping": 30.0,
            "gemma4.rope.freq_base_swa": 10000.0,
            "gemma4.rope.dimension_count_swa": GEMMA4_HEAD_SWA,
        },
    ),
}

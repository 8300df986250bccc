"""Tiny models of Gemma 4's text model (planner.archs.gemma4): gemma3's attention with a per-layer head
size, the per-layer input gate and an output scale; layers sharing an earlier layer's cache have no K/V;
routed experts beside the dense FFN in the MoE release."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, norm, output_norm
from tests.support.tiny.gemma3n import per_layer_embeddings, per_layer_input

# Gemma 4's tiny layout: which layers use the sliding window (the header carries it as a per-layer array),
# their head size beside the global layers' one, and the per-layer-embedding width
GEMMA4_SWA = (True, True, True, False, True, False)
GEMMA4_HEAD_SWA, GEMMA4_EMBD_PER_LAYER = 64, 64


def _is_swa(spec: TinySpec, il: int) -> bool:
    pattern = spec.extra_kv["gemma4.attention.sliding_window_pattern"]
    assert isinstance(pattern, list)
    return il < len(pattern) and bool(pattern[il])


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    """A Gemma 4 block (llama_model_gemma4::load_arch_tensors), as its header describes it: head size and KV
    heads per layer, the FFN width per layer (double-wide in the shared-cache layers of E2B), experts."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    hk = spec.count("attention.key_length_swa") if _is_swa(spec, il) else spec.head_k
    n_kv = spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    q_dim, kv_dim = hk * spec.n_head, hk * n_kv
    ff = spec.ff_lengths[il] if spec.ff_lengths else spec.n_ff
    owns_kv = il < spec.n_layer - spec.count("attention.shared_kv_layers", 0)
    out = norm(spec, il, "attn_norm") + [(p + "attn_q.weight", (e, q_dim), w)]
    if owns_kv:
        out += [(p + "attn_k.weight", (e, kv_dim), w), (p + "attn_v.weight", (e, kv_dim), w)]
        out.append((p + "attn_k_norm.weight", (hk,), f32))
    out += [(p + "attn_output.weight", (q_dim, e), w), (p + "attn_q_norm.weight", (hk,), f32)]
    out += norm(spec, il, "post_attention_norm") + [(p + "layer_output_scale.weight", (1,), f32)]
    out += norm(spec, il, "ffn_norm")
    out += [(p + "ffn_gate.weight", (e, ff), w), (p + "ffn_up.weight", (e, ff), w), (p + "ffn_down.weight", (ff, e), w)]
    out += norm(spec, il, "post_ffw_norm")
    if spec.n_expert:  # the 26B-A4B: routed experts beside the dense FFN, each with its own norms
        ne, fe = spec.n_expert, spec.n_ff_exp
        out += [
            (p + "ffn_gate_inp.weight", (e, ne), f32),
            (p + "ffn_gate_inp.scale", (e,), f32),
            *norm(spec, il, "pre_ffw_norm_2"),
            *norm(spec, il, "post_ffw_norm_1"),
            *norm(spec, il, "post_ffw_norm_2"),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "ffn_down_exps.scale", (ne,), f32),  # the router's per-expert scale, as the converter folds it
        ]
    width = spec.count("embedding_length_per_layer_input")
    return out + (per_layer_input(spec, il, width) if width else [])


def global_tensors(spec: TinySpec) -> Shapes:
    """Gemma 4's tensors outside the blocks: the per-layer embeddings and the global layers' RoPE factors."""
    width = spec.count("embedding_length_per_layer_input")
    rope_freqs: Shapes = [("rope_freqs.weight", (spec.head_k // 2,), Q.F32)]
    return (per_layer_embeddings(spec, width) if width else []) + rope_freqs + output_norm(spec)


def _header(pattern: list[bool], shared: int, head_swa: int, per_layer: int) -> dict[str, object]:
    return {
        "gemma4.attention.sliding_window_pattern": pattern,
        "gemma4.attention.shared_kv_layers": shared,
        "gemma4.attention.key_length_swa": head_swa,
        "gemma4.attention.value_length_swa": head_swa,
        "gemma4.embedding_length_per_layer_input": per_layer,
        "gemma4.final_logit_softcapping": 30.0,
        "gemma4.rope.freq_base_swa": 10000.0,
        "gemma4.rope.dimension_count_swa": head_swa,
    }


# Gemma 4 26B-A4B and 31B: five windowed layers to a global one, the global layers with fewer KV heads of
# twice the size and no V projection (attention_k_eq_v), no shared caches, no per-layer embeddings
_LARGE_SWA = [True, True, True, True, True, False, True]

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
        extra_kv=_header(list(GEMMA4_SWA), 2, GEMMA4_HEAD_SWA, GEMMA4_EMBD_PER_LAYER),
        without=("blk.3.attn_v.weight",),
    ),
    "gemma4-moe-kv-heads": TinySpec(  # 26B-A4B: 8 KV heads windowed, 2 global; 128 experts, 8 used
        "gemma4",
        n_layer=7,
        n_head=4,
        head_dim=128,
        kv_heads=(2, 2, 2, 2, 2, 1, 2),
        n_swa=512,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=32,
        output_type=None,
        extra_kv=_header(_LARGE_SWA, 0, 64, 0),
        without=("blk.5.attn_v.weight",),
        covers=(
            "per-layer KV heads",
            "experts beside the dense FFN, per-expert scale",
            "no per-layer embeddings",
            "no shared caches",
            "V from K in the global layer",
            "last layer sliding",
        ),
    ),
    "gemma4-moe-fused": TinySpec(
        "gemma4",
        n_layer=7,
        n_head=4,
        head_dim=128,
        kv_heads=(2, 2, 2, 2, 2, 1, 2),
        n_swa=512,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=32,
        output_type=None,
        extra_kv=_header(_LARGE_SWA, 0, 64, 0),
        optional=("fused_qkv", "fused_gate_up_exps"),
        covers=("fused QKV", "fused gate-up experts"),
    ),
    "gemma4-dense-untied": TinySpec(  # 31B: 16 KV heads windowed, 4 global
        "gemma4",
        n_layer=6,
        n_head=4,
        head_dim=128,
        kv_heads=(4, 4, 4, 4, 4, 1),
        n_swa=1024,
        extra_kv=_header(_LARGE_SWA[:6], 0, 32, 0),
        without=("blk.5.attn_v.weight",),
        covers=("per-layer KV heads", "MHA windowed, MQA global", "untied", "window 1,024", "last layer global"),
    ),
    "gemma4-e2b-double-wide": TinySpec(  # E2B: 35 layers, 20 sharing caches, the shared ones twice as wide
        "gemma4",
        n_layer=10,
        n_head=2,
        n_head_kv=1,
        head_dim=128,
        n_swa=512,
        ff_lengths=(256,) * 5 + (512,) * 5,
        output_type=None,
        extra_kv=_header([True, True, True, True, False] * 2, 5, 64, 32),
        covers=("double-wide FFN in the shared-cache layers (per-layer FFN widths)", "5 shared-cache layers"),
    ),
}

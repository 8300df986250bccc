"""Tiny models of llama and the architectures llama.cpp builds in its shape (planner.archs.llama), and
of any architecture without a family of its own (the planner prices those in llama's shape too)."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import (
    Shapes,
    TinySpec,
    attn_output,
    biased_ffn,
    experts,
    fused_qkv,
    gated_ffn,
    norm,
    output_norm,
    qkv,
    qkv_biases,
    shared_expert,
    ungated_ffn,
)

_NORM_BIASES = ("orion", "starcoder2", "stablelm", "gpt2", "starcoder")
_LEARNED_POSITIONS = ("gpt2", "starcoder")
_BIASES_EVERYWHERE = ("starcoder2", "gpt2", "starcoder")  # and a GELU FFN without a gate


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    a, hk, p = spec.arch, spec.head_k, f"blk.{il}."
    out = norm(spec, il, "attn_norm", bias=a in _NORM_BIASES)
    out += fused_qkv(spec, il, bias=True) if a in _LEARNED_POSITIONS else qkv(spec, il)
    if a in ("qwen2", "dream", "starcoder2"):
        out += qkv_biases(spec, il)
    if a in ("qwen3", "qwen3moe"):
        out += [(p + "attn_q_norm.weight", (hk,), Q.F32), (p + "attn_k_norm.weight", (hk,), Q.F32)]
    if a in ("olmoe", "minimax-m2"):  # Q/K norms over the whole projection
        q_dim, kv_dim = hk * spec.n_head, hk * spec.n_head_kv
        out += [(p + "attn_q_norm.weight", (q_dim,), Q.F32), (p + "attn_k_norm.weight", (kv_dim,), Q.F32)]
    out += attn_output(spec, il)
    if a in _BIASES_EVERYWHERE:
        return out + [
            (p + "attn_output.bias", (spec.n_embd,), Q.F32),
            *norm(spec, il, "ffn_norm", True),
            *biased_ffn(spec, il),
        ]
    # Seed-OSS names the FFN's pre-norm "post_attention_norm"
    out += norm(spec, il, "post_attention_norm" if a == "seed_oss" else "ffn_norm", bias=a in ("orion", "stablelm"))
    if spec.n_expert and il >= spec.count("leading_dense_block_count", 0):
        out += experts(spec, il, spec.n_ff_exp or spec.n_ff)
        if a in ("ernie4_5-moe", "minimax-m2"):  # a per-expert selection bias
            out.append((p + "exp_probs_b.bias", (spec.n_expert,), Q.F32))
        if spec.n_ff_shexp:
            if a != "ernie4_5-moe":  # ernie's shared expert has no gate of its own
                out.append((p + "ffn_gate_inp_shexp.weight", (spec.n_embd,), Q.F32))
            out += shared_expert(spec, il, spec.n_ff_shexp)
        return out
    return out + (ungated_ffn(spec, il) if a == "arcee" else gated_ffn(spec, il))  # arcee: ReLU² without a gate


def global_tensors(spec: TinySpec) -> Shapes:
    if spec.arch in _LEARNED_POSITIONS:
        return [("position_embd.weight", (spec.n_embd, spec.n_ctx_train), Q.F32), *output_norm(spec, bias=True)]
    return output_norm(spec, bias=spec.arch in _NORM_BIASES)


ENDLESS = TinySpec(
    "llama",
    n_layer=4,
    n_embd=256,
    n_head=4,
    n_head_kv=4,
    n_ff=512,
    n_ctx_train=32768,
    never_ends=True,
    name="Endless tiny",
)
"""A model that practically never ends a reply by itself: for tests that need a long stream."""

ZOO: dict[str, TinySpec] = {
    "llama-f16": TinySpec("llama"),
    "llama-q8_0": TinySpec("llama", weight_type=Q.Q8_0, embd_type=Q.Q8_0, output_type=Q.Q8_0, n_vocab=1024),
    "llama-q4_k": TinySpec(
        "llama", n_embd=256, n_ff=512, weight_type=Q.Q4_K, embd_type=Q.Q6_K, output_type=Q.Q6_K, n_head=8, n_head_kv=4
    ),
    "qwen2-q4_0": TinySpec("qwen2", weight_type=Q.Q4_0, output_type=Q.Q8_0),
    # Ministral 3: llama's layers, queries scaled by position (attention.temperature_scale)
    "mistral3": TinySpec(
        "mistral3", n_head_kv=2, weight_type=Q.Q8_0, extra_kv={"mistral3.attention.temperature_scale": 0.1}
    ),
    "exaone": TinySpec("exaone", weight_type=Q.Q8_0),
    "smollm3": TinySpec("smollm3", n_layer=8),  # every 4th layer without RoPE
    "ernie4_5": TinySpec("ernie4_5", output_type=None),
    "minicpm": TinySpec("minicpm", weight_type=Q.Q8_0, output_type=None),
    "internlm2": TinySpec("internlm2", n_head_kv=4),
    "xverse": TinySpec("xverse", weight_type=Q.Q8_0),
    "seed_oss": TinySpec("seed_oss", n_head=4, n_head_kv=2, output_type=None),
    "arcee": TinySpec("arcee", n_head_kv=2),
    "orion": TinySpec("orion", weight_type=Q.Q8_0, extra_kv={"orion.attention.layer_norm_epsilon": 1e-5}),
    "starcoder2": TinySpec("starcoder2", n_head_kv=2, extra_kv={"starcoder2.attention.layer_norm_epsilon": 1e-5}),
    "gpt2": TinySpec("gpt2", n_ctx_train=4096, extra_kv={"gpt2.attention.layer_norm_epsilon": 1e-5}),
    "starcoder": TinySpec(
        "starcoder", n_head_kv=1, n_ctx_train=8192, extra_kv={"starcoder.attention.layer_norm_epsilon": 1e-5}
    ),
    "stablelm": TinySpec("stablelm", weight_type=Q.Q8_0, extra_kv={"stablelm.attention.layer_norm_epsilon": 1e-5}),
    "ernie4_5-moe": TinySpec(
        "ernie4_5-moe",
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=128,
        extra_kv={"ernie4_5-moe.interleave_moe_layer_step": 1},
    ),
    "minimax-m2": TinySpec(
        "minimax-m2",
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff=64,
        n_ff_exp=64,
        extra_kv={"minimax-m2.expert_gating_func": 2},
    ),
    "qwen3-hd": TinySpec("qwen3", n_embd=128, n_head=4, n_head_kv=2, head_dim=64, output_type=None),
    "llama-moe": TinySpec("llama", n_expert=4, n_expert_used=2, weight_type=Q.Q8_0, name="tiny-mixtral"),
    "qwen2moe": TinySpec("qwen2moe", n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_shexp=128),
    "qwen3moe": TinySpec("qwen3moe", n_expert=8, n_expert_used=2, n_ff_exp=64, head_dim=64, weight_type=Q.Q4_0),
    "olmoe": TinySpec("olmoe", n_expert=8, n_expert_used=2, n_ff=64, n_head_kv=4),
    # variants along the axes real releases of these architectures differ in
    "llama-mha-rope-freqs": TinySpec(  # Llama 2's full heads; Llama 3.1's RoPE frequency factors
        "llama", n_head_kv=4, optional=("rope_freqs",), covers=("MHA", "untied", "rope_freqs")
    ),
    "llama-mqa-tied": TinySpec("llama", n_head_kv=1, output_type=None, covers=("MQA", "tied")),
    "llama-head-size": TinySpec(  # Mistral Nemo: 128-wide heads on a 5,120 embedding with 32 heads
        "llama", n_head=4, n_head_kv=2, head_dim=64, covers=("GQA", "head size != n_embd / n_head")
    ),
    "llama-biases": TinySpec(
        "llama",
        optional=("qkv_bias", "attn_output_bias", "ffn_bias"),
        covers=("Q/K/V biases", "attention output bias", "FFN biases"),
    ),
    "qwen2-tied-gqa7": TinySpec(  # Qwen2.5 0.5B: 14 heads over 2 KV heads, tied
        "qwen2", n_embd=224, n_head=14, n_head_kv=2, output_type=None, covers=("GQA 7:1", "tied")
    ),
    "qwen2-mha-untied": TinySpec("qwen2", n_head_kv=4, covers=("MHA", "untied")),  # Qwen1.5
    "qwen3-mqa-untied": TinySpec("qwen3", n_head_kv=1, head_dim=64, covers=("MQA", "untied", "head size")),
    "qwen3-mha-tied": TinySpec("qwen3", n_head_kv=4, output_type=None, covers=("MHA", "tied")),
    "qwen3-wide-queries": TinySpec(  # Qwen3 0.6B: 16 x 128 query width on a 1,024 embedding
        "qwen3", n_head=8, n_head_kv=2, head_dim=32, covers=("GQA 4:1", "query width != n_embd")
    ),
    "qwen3moe-128e": TinySpec(  # Qwen3-30B-A3B: 128 experts, 8 used, 32 query heads over 4
        "qwen3moe",
        n_head=8,
        n_head_kv=1,
        head_dim=32,
        n_expert=128,
        n_expert_used=8,
        n_ff_exp=16,
        covers=("128 experts, 8 used", "GQA 8:1", "query width != n_embd"),
    ),
    "qwen3moe-mha-tied": TinySpec(
        "qwen3moe", n_expert=8, n_expert_used=2, n_ff_exp=64, n_head_kv=4, output_type=None, covers=("MHA", "tied")
    ),
    "qwen2moe-60e-bias": TinySpec(  # Qwen1.5-MoE-A2.7B: 60 experts, 4 used, a shared expert, Q/K/V biases
        "qwen2moe",
        n_expert=60,
        n_expert_used=4,
        n_ff_exp=32,
        n_ff_shexp=160,
        optional=("qkv_bias",),
        covers=("60 experts, 4 used", "shared expert", "Q/K/V biases"),
    ),
    "mistral3-tied-head-size": TinySpec(  # Ministral 3 3B: 128-wide heads on 3,072 / 32, tied
        "mistral3",
        head_dim=64,
        output_type=None,
        extra_kv={"mistral3.attention.temperature_scale": 0.1},
        covers=("tied", "head size", "temperature scale"),
    ),
    "mistral3-plain": TinySpec("mistral3", n_head_kv=1, covers=("no temperature scale", "MQA", "untied")),
    "smollm3-tied-6": TinySpec(  # SmolLM3 is tied; 6 layers: not a multiple of the NoPE step of 4
        "smollm3", n_layer=6, output_type=None, covers=("tied", "layers not a multiple of the NoPE step")
    ),
    "smollm3-fused-qkv": TinySpec(  # convert_hf_to_gguf.py --fuse-qkv: RoPE-less layers keep views of it
        "smollm3", n_layer=8, optional=("fused_qkv",), covers=("fused QKV (--fuse-qkv)", "untied")
    ),
    "qwen3-fused-qkv": TinySpec(
        "qwen3",
        n_head_kv=2,
        head_dim=64,
        output_type=None,
        optional=("fused_qkv",),
        covers=("fused QKV (--fuse-qkv)", "tied"),
    ),
    "ernie4_5-head-size": TinySpec(  # ERNIE 4.5 0.3B: 128-wide heads on 1,024 / 16
        "ernie4_5", head_dim=64, covers=("head size", "untied")
    ),
    "ernie4_5-moe-leading-dense": TinySpec(  # ERNIE 4.5 21B-A3B: a dense first layer, 64 experts, 6 used
        "ernie4_5-moe",
        n_layer=5,
        n_expert=64,
        n_expert_used=6,
        n_ff_exp=32,
        n_ff_shexp=64,
        output_type=None,
        extra_kv={"ernie4_5-moe.interleave_moe_layer_step": 1, "ernie4_5-moe.leading_dense_block_count": 1},
        covers=("leading dense layer", "64 experts, 6 used", "shared expert", "tied"),
    ),
    "stablelm2-12b-parallel": TinySpec(  # StableLM 2 12B: per-head Q/K norms, no FFN norm (parallel residual)
        "stablelm",
        n_head_kv=1,
        optional=("qk_norm_per_head",),
        without=("ffn_norm.weight", "ffn_norm.bias"),
        extra_kv={"stablelm.attention.layer_norm_epsilon": 1e-5},
        covers=("per-head Q/K norms", "parallel residual (no FFN norm)", "MQA"),
    ),
    "minicpm-scales-untied": TinySpec(  # MiniCPM 2B / 4: Granite's scales (embedding, residual, logits), untied
        "minicpm",
        n_head_kv=4,
        weight_type=Q.Q8_0,
        extra_kv={"minicpm.embedding_scale": 12.0, "minicpm.residual_scale": 0.22, "minicpm.logit_scale": 0.1},
        covers=("embedding, residual and logit scales", "MHA", "untied"),
    ),
    "minicpm-moe": TinySpec(  # MiniCPM-MoE-8x2B: 8 experts, 2 used, tied
        "minicpm",
        n_expert=8,
        n_expert_used=2,
        n_ff=64,
        output_type=None,
        extra_kv={"minicpm.embedding_scale": 12.0, "minicpm.residual_scale": 0.22},
        covers=("8 experts, 2 used", "tied"),
    ),
    "internlm2-gqa": TinySpec("internlm2", n_head=8, n_head_kv=2, covers=("GQA 4:1",)),  # InternLM2.5 7B: 32 over 8
    "exaone-tied-rope-freqs": TinySpec(  # EXAONE 3.5 2.4B: tied; RoPE frequency factors
        "exaone", n_head_kv=1, output_type=None, optional=("rope_freqs",), covers=("tied", "rope_freqs", "MQA")
    ),
    "seed_oss-untied-bias": TinySpec(  # Seed-OSS 36B: Q/K/V biases, 80 heads over 8, untied
        "seed_oss",
        n_head=8,
        n_head_kv=1,
        head_dim=32,
        optional=("qkv_bias",),
        covers=("Q/K/V biases", "GQA 8:1", "query width != n_embd", "untied"),
    ),
    "arcee-tied-rope-freqs": TinySpec(
        "arcee", n_head_kv=1, output_type=None, optional=("rope_freqs",), covers=("tied", "rope_freqs", "MQA")
    ),
    "starcoder2-tied-mqa": TinySpec(
        "starcoder2",
        n_head_kv=1,
        output_type=None,
        extra_kv={"starcoder2.attention.layer_norm_epsilon": 1e-5},
        covers=("tied", "MQA"),
    ),
    "starcoder-tied": TinySpec(
        "starcoder",
        n_head_kv=1,
        output_type=None,
        extra_kv={"starcoder.attention.layer_norm_epsilon": 1e-5},
        covers=("tied", "MQA"),
    ),
    "gpt2-tied": TinySpec(
        "gpt2",
        n_ctx_train=4096,
        output_type=None,
        extra_kv={"gpt2.attention.layer_norm_epsilon": 1e-5},
        covers=("tied",),
    ),
    "olmoe-64e": TinySpec(  # OLMoE-1B-7B: 64 experts, 8 used
        "olmoe",
        n_expert=64,
        n_expert_used=8,
        n_ff=16,
        n_head_kv=4,
        n_layer=3,
        covers=("64 experts, 8 used", "odd layers"),
    ),
    "minimax-m2-mha-untied": TinySpec(
        "minimax-m2",
        n_head_kv=4,
        n_expert=16,
        n_expert_used=4,
        n_ff=32,
        n_ff_exp=32,
        head_dim=64,
        extra_kv={"minimax-m2.expert_gating_func": 2},
        covers=("MHA", "head size", "16 experts, 4 used"),
    ),
    "ernie4_5-moe-no-bias": TinySpec(
        "ernie4_5-moe",
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        extra_kv={"ernie4_5-moe.interleave_moe_layer_step": 1},
        without=("exp_probs_b.bias",),
        covers=("no selection bias", "no shared expert"),
    ),
}

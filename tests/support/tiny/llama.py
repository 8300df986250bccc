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
    if spec.n_expert:
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
}

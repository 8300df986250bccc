"""Tiny models of BitNet b1.58 (planner.archs.bitnet): sub-norms inside attention and FFN, per-tensor
scales, and no output tensor (the LM head reads token_embd), in load_arch_tensors' order."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attn_output, gated_ffn, norm, output_norm, qkv

global_tensors = output_norm


def _scale(il: int, name: str) -> Shapes:
    return [(f"blk.{il}.{name}.scale", (1,), Q.F32)]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    q, k, v = qkv(spec, il)
    gate, up, down = gated_ffn(spec, il)
    return [
        *norm(spec, il, "attn_norm"),
        *norm(spec, il, "attn_sub_norm"),
        q,
        *_scale(il, "attn_q"),
        k,
        *_scale(il, "attn_k"),
        v,
        *_scale(il, "attn_v"),
        *attn_output(spec, il),
        *_scale(il, "attn_output"),
        *norm(spec, il, "ffn_norm"),
        (f"blk.{il}.ffn_sub_norm.weight", (spec.n_ff,), Q.F32),
        gate,
        *_scale(il, "ffn_gate"),
        down,
        *_scale(il, "ffn_down"),
        up,
        *_scale(il, "ffn_up"),
    ]


ZOO: dict[str, TinySpec] = {
    "bitnet": TinySpec("bitnet", n_head_kv=2, output_type=None),
}

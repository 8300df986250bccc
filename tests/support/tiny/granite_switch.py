"""Tiny models of Granite Switch (planner.archs.granite_switch): Granite's layers and, per layer, the
adapters' stacked LoRA A and B matrices (slot 0 the base), in load_arch_tensors' order."""

from __future__ import annotations

from tests.support.tiny.common import Shapes, TinySpec, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    n_q, n_kv, ff = hk * spec.n_head, hk * spec.n_head_kv, spec.n_ff
    rank, slots = spec.count("adapters.lora_rank"), spec.count("adapters.count") + 1
    gate, up, down = gated_ffn(spec, il)
    out: Shapes = [
        *norm(spec, il, "attn_norm"),
        (p + "attn_qkv.weight", (e, n_q + 2 * n_kv), w),
        (p + "attn_output.weight", (n_q, e), w),
        *norm(spec, il, "ffn_norm"),
        gate,
        down,
        up,
    ]
    for name, n_in, n_out in (
        ("attn_q", e, n_q),
        ("attn_k", e, n_kv),
        ("attn_v", e, n_kv),
        ("attn_output", n_q, e),
        ("ffn_gate", e, ff),
        ("ffn_up", e, ff),
        ("ffn_down", ff, e),
    ):
        out += [(p + name + ".lora_a", (n_in, rank, slots), w), (p + name + ".lora_b", (rank, n_out, slots), w)]
    return out


ZOO: dict[str, TinySpec] = {
    # two adapters of rank 16, Granite's residual and embedding scales
    "graniteswitch": TinySpec(
        "graniteswitch",
        n_head_kv=2,
        output_type=None,
        extra_kv={
            "graniteswitch.logit_scale": 8.0,
            "graniteswitch.residual_scale": 0.22,
            "graniteswitch.embedding_scale": 12.0,
            "graniteswitch.attention.scale": 0.0078125,
            "graniteswitch.adapters.count": 2,
            "graniteswitch.adapters.lora_rank": 16,
            "graniteswitch.adapters.router_gain": 20.0,
            "graniteswitch.adapters.token_ids_activate": [300, 301],
            "graniteswitch.adapters.token_ids_substitute": [3, 3],
        },
    ),
}

"""Tiny models of Deci / Llama-Nemotron (planner.archs.deci): each layer's tensors as its head counts
and FFN width say (llama_model_deci::load_arch_tensors)."""

from __future__ import annotations

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, p = spec.n_embd, spec.weight_type, f"blk.{il}."
    n_head, n_kv, ff = spec.q_heads[il], spec.kv_heads[il], spec.ff_lengths[il]
    out: Shapes = []
    if n_head > 0 and n_kv == 0:  # "linear attention"
        out += norm(spec, il, "attn_norm") + [(p + "attn_output.weight", (e, e), w)]
    elif n_kv > 0:
        out += norm(spec, il, "attn_norm") + attention(spec.with_(n_head=n_head, n_head_kv=n_kv), il)
    if ff > 0:
        gate, up, down = gated_ffn(spec, il, ff)
        out += norm(spec, il, "ffn_norm") + [gate, down, up]
    return out


ZOO: dict[str, TinySpec] = {
    # Llama-3.1-Nemotron's searched layers: full, "linear" attention, no FFN, no attention, full
    "deci": TinySpec(
        "deci",
        n_layer=5,
        head_dim=32,
        q_heads=(4, 4, 4, 0, 4),
        kv_heads=(2, 0, 1, 0, 2),
        ff_lengths=(256, 128, 0, 192, 256),
    ),
}

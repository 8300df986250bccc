"""Tiny models of Cohere 2 MoE (planner.archs.cohere2moe): leading dense layers, then routed experts
(separate or fused gate/up) and a shared expert, in llama_model_cohere2moe::load_arch_tensors' order."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm, shared_expert

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, p, ne, fe = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_expert, spec.n_ff_exp
    out = norm(spec, il, "attn_norm") + attention(spec, il)
    if il < spec.count("leading_dense_block_count"):
        gate, up, down = gated_ffn(spec, il)
        return out + [gate, down, up]
    out += [(p + "ffn_gate_inp.weight", (e, ne), Q.F32), (p + "ffn_down_exps.weight", (fe, e, ne), w)]
    if "fused" in spec.name.split():
        out.append((p + "ffn_gate_up_exps.weight", (e, 2 * fe, ne), w))
    else:
        out += [(p + "ffn_gate_exps.weight", (e, fe, ne), w), (p + "ffn_up_exps.weight", (e, fe, ne), w)]
    if spec.count("expert_shared_count", 0):
        gate, up, down = shared_expert(spec, il, spec.n_ff_shexp)
        out += [gate, down, up]
    return out


def _kv(**more: object) -> dict[str, object]:
    return {
        "cohere2moe.logit_scale": 0.25,
        "cohere2moe.leading_dense_block_count": 1,
        "cohere2moe.expert_shared_count": 1,
        **{f"cohere2moe.{key}": value for key, value in more.items()},
    }


ZOO: dict[str, TinySpec] = {
    # one dense layer, then 8 experts (sigmoid routing by default) and a shared expert; layer norms, as
    # Command A has no RMS epsilon; windows on 3 of every 4 layers after the first
    "cohere2moe": TinySpec(
        "cohere2moe",
        n_layer=8,
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        n_swa=128,
        extra_kv=_kv(
            **{"attention.layer_norm_rms_epsilon": None, "attention.layer_norm_epsilon": 1e-5},
            expert_weights_norm=True,
        ),
    ),
    # RMS norms, softmax routing, the experts' gate and up fused in one tensor, no shared expert
    "cohere2moe-fused": TinySpec(
        "cohere2moe",
        n_head_kv=2,
        n_expert=4,
        n_expert_used=2,
        n_ff_exp=64,
        n_swa=128,
        weight_type=Q.Q8_0,
        name="tiny cohere2moe fused",
        extra_kv={**_kv(expert_gating_func=1), "cohere2moe.expert_shared_count": 0},
    ),
}

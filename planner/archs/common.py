"""Header rules more than one family uses (llama_model_base::load_hparams and its helpers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.errors import GGUFError
from planner.model import swa_pattern

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


# tensors of a skipped multi-token-prediction block that a family still loads (ModelAnatomy.mtp_loaded):
# the output heads it creates TENSOR_NOT_REQUIRED alone (cohere2moe) ...
MTP_HEADS = ("nextn.embed_tokens.", "nextn.shared_head_")
# ... and with them the block's FFN and experts, also created without the skip flag (step35, hy_v3)
MTP_FFN_AND_HEADS = (*MTP_HEADS, "ffn_gate", "ffn_up", "ffn_down", "exp_probs_b")


def load_swa_pattern(anatomy: ModelAnatomy, meta: Meta, n_pattern: int, dense_first: bool = False) -> None:
    """llama_model_base::load_swa_pattern: an explicit per-layer array wins, else a period."""
    value = meta.get("attention.sliding_window_pattern")
    if isinstance(value, list) and len(value) == anatomy.n_layer:
        pattern = [bool(v) for v in value]
    else:
        if isinstance(value, int) and not isinstance(value, bool):
            n_pattern = value
        pattern = swa_pattern(anatomy.n_layer, n_pattern, dense_first)
    for layer, is_swa in zip(anatomy.layers, pattern):
        layer.is_swa = is_swa


def use_multi_section_rope(anatomy: ModelAnatomy, meta: Meta) -> None:
    """llama_hparams::use_mrope: with the first two RoPE sections set (rope.dimension_sections), GLM-4's
    RoPE type is MROPE and the graph takes four positions per token (n_pos_per_embd)."""
    sections = meta.get("rope.dimension_sections")
    if isinstance(sections, list) and len(sections) >= 2 and sections[0] > 0 and sections[1] > 0:
        anatomy.n_pos_per_embd = 4


def plain(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Dense attention on every layer, no sliding window (experts read when present)."""
    read_experts(anatomy, meta)


def read_experts(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Mixture-of-experts hyper-parameters (llama_model_base::load_hparams and the arch loaders)."""
    n_expert = meta.int_or("expert_count", 0)
    if n_expert <= 0:
        return
    used = meta.get("expert_used_count", 0)
    from planner.hparams import Experts  # only models with experts pay for the records' import

    anatomy.experts = Experts(
        n_expert=n_expert,
        n_used=max(used) if isinstance(used, list) and used else int(used or 0),
        n_shared=meta.int_or("expert_shared_count", 0),
        weights_scale=meta.float_or("expert_weights_scale", 0.0),
        weights_norm=bool(meta.get("expert_weights_norm", False)),
        gating_func=meta.int_or("expert_gating_func", 0),
    )


def require(anatomy: ModelAnatomy, meta: Meta, *keys: str) -> None:
    """Keys llama.cpp's loader insists on: without one it refuses the model."""
    for key in keys:
        if meta.get(key) is None:
            raise GGUFError(
                anatomy.path, f"required metadata {anatomy.architecture}.{key} is missing (llama.cpp refuses the model)"
            )


def require_output(anatomy: ModelAnatomy) -> None:
    """An untied output matrix the loader creates without TENSOR_NOT_REQUIRED: without it llama.cpp refuses."""
    if not any(t.name == "output.weight" for t in anatomy.output_tensors):
        problem = f"missing tensor 'output.weight' (llama.cpp refuses a {anatomy.architecture} model without it)"
        raise GGUFError(anatomy.path, problem)


def per_layer_floats(anatomy: ModelAnatomy, meta: Meta, key: str) -> list[float]:
    """get_key_or_arr of floats: one number for every layer, or an array of exactly one per layer."""
    value = meta.get(key)
    if value is None:
        return []
    if isinstance(value, list):
        if len(value) != anatomy.n_layer:
            problem = (
                f"key {anatomy.architecture}.{key} has wrong array length; expected {anatomy.n_layer}, got {len(value)}"
            )
            raise GGUFError(anatomy.path, problem)
        return [float(v) for v in value]
    return [float(value)] * anatomy.n_layer


def read_swiglu_clamps(anatomy: ModelAnatomy, meta: Meta) -> None:
    """swiglu_clamp_exp and swiglu_clamp_shexp: the experts' and the other gated FFNs' SwiGLU limits."""
    anatomy.swiglu_clamp_exp = per_layer_floats(anatomy, meta, "swiglu_clamp_exp")
    anatomy.swiglu_clamp_shexp = per_layer_floats(anatomy, meta, "swiglu_clamp_shexp")


def read_ssm(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Mamba-style state-space hyper-parameters (conv kernel, inner size, state size, dt rank, groups)."""
    sizes = {
        key: meta.int_or(f"ssm.{name}", 0)
        for key, name in (
            ("d_conv", "conv_kernel"),
            ("d_inner", "inner_size"),
            ("d_state", "state_size"),
            ("dt_rank", "time_step_rank"),
        )
    }
    for key, value in sizes.items():
        if not 0 < value <= 1 << 20:
            problem = f"{anatomy.architecture}: ssm {key.replace('_', ' ')} {value} is out of range"
            raise GGUFError(anatomy.path, problem)
    from planner.hparams import StateSpace

    anatomy.ssm = StateSpace(
        **sizes, n_group=meta.int_or("ssm.group_count", 0), dt_b_c_rms=bool(meta.get("ssm.dt_b_c_rms", False))
    )


def recurrent_where_no_kv_heads(anatomy: ModelAnatomy) -> None:
    for layer in anatomy.layers:
        layer.is_recurrent = layer.n_head_kv == 0
        layer.has_kv = not layer.is_recurrent

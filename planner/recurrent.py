"""Recurrent state (llama_memory_recurrent): F32 conv and scan states per recurrent layer.

Each recurrent layer holds r [n_embd_r, rows] and s [n_embd_s, rows] with
rows = max(1, n_seq_max) x (1 + n_rs_seq): independent of the context length,
the micro-batch, flash attention and the KV type.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.config import Resolved
from planner.ggml_types import F32, GGMLType
from planner.model import ModelAnatomy


@dataclass(frozen=True)
class RSTensor:
    layer: int
    kind: str  # "r" (convolution / token shift) or "s" (scan / wkv state)
    type: GGMLType
    ne: tuple[int, int]

    @property
    def nbytes(self) -> int:
        return self.type.row_bytes(self.ne[0]) * self.ne[1]


@dataclass(frozen=True)
class RSLayout:
    rows: int
    tensors: list[RSTensor]

    @property
    def total(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def n_embd_r(model: ModelAnatomy) -> int:
    """llama_hparams::n_embd_r: the per-sequence convolution (or token-shift) state."""
    x = model.extra
    if x.get("wkv_head_size"):
        return x.get("token_shift_count", 2) * model.n_embd
    if x.get("shortconv_l_cache"):
        return model.n_embd * (x["shortconv_l_cache"] - 1)
    d_conv = x.get("ssm_d_conv", 0)
    return (d_conv - 1 if d_conv > 0 else 0) * (
        x.get("ssm_d_inner", 0) + 2 * x.get("ssm_n_group", 0) * x.get("ssm_d_state", 0)
    )


def n_embd_s(model: ModelAnatomy) -> int:
    """llama_hparams::n_embd_s: the per-sequence scan (or WKV) state."""
    x = model.extra
    if x.get("wkv_head_size"):
        return model.n_embd * x["wkv_head_size"]
    return x.get("ssm_d_state", 0) * x.get("ssm_d_inner", 0)


def rs_layout(model: ModelAnatomy, r: Resolved) -> RSLayout:
    rows = max(1, r.n_seq_max) * (1 + model.extra.get("n_rs_seq", 0))
    tensors: list[RSTensor] = []
    er, es = n_embd_r(model), n_embd_s(model)
    for layer in model.layers:
        if layer.is_recurrent and not layer.is_mtp:
            tensors.append(RSTensor(layer.index, "r", F32, (er, rows)))
            tensors.append(RSTensor(layer.index, "s", F32, (es, rows)))
    return RSLayout(rows, tensors)

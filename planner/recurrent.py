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
    """One tensor of a recurrent model's state (convolution/token shift, or scan/wkv)."""

    layer: int
    kind: str  # "r" (convolution / token shift) or "s" (scan / wkv state)
    type: GGMLType
    ne: tuple[int, int]

    @property
    def nbytes(self) -> int:
        return self.type.row_bytes(self.ne[0]) * self.ne[1]


@dataclass(frozen=True)
class RSLayout:
    """A recurrent model's state cache: its rows (sequences) and tensors."""

    rows: int
    tensors: list[RSTensor]

    @property
    def total(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def n_embd_r(model: ModelAnatomy) -> int:
    """llama_hparams::n_embd_r: the per-sequence convolution (or token-shift) state."""
    if model.rwkv is not None:
        return model.rwkv.token_shift_count * model.n_embd
    if model.shortconv_l_cache:
        return model.n_embd * (model.shortconv_l_cache - 1)
    if model.kda is not None:  # Kimi's Q, K and V convolutions, each n_head x head_dim wide
        d_conv = model.kda.d_conv - 1 if model.kda.d_conv > 0 else 3
        return 3 * d_conv * model.layers[0].n_head * model.kda.head_dim
    ssm = model.ssm
    if ssm is None:
        return 0
    return (ssm.d_conv - 1 if ssm.d_conv > 0 else 0) * (ssm.d_inner + 2 * ssm.n_group * ssm.d_state)


def n_embd_s(model: ModelAnatomy) -> int:
    """llama_hparams::n_embd_s: the per-sequence scan (or WKV) state."""
    if model.rwkv is not None:
        return model.n_embd * model.rwkv.head_size
    if model.kda is not None:  # one head_dim x head_dim state a head
        return model.kda.head_dim * model.kda.head_dim * model.layers[0].n_head
    if model.n_embd_head_la:  # MiniMax-01's lightning attention: the same, its own head size
        return model.n_embd_head_la * model.n_embd_head_la * model.layers[0].n_head
    return model.ssm.d_state * model.ssm.d_inner if model.ssm else 0


def rs_layout(model: ModelAnatomy, r: Resolved) -> RSLayout:
    rows = max(1, r.n_seq_max)  # llama-cpp-python leaves n_rs_seq (rollback snapshots) at 0
    tensors: list[RSTensor] = []
    er, es = n_embd_r(model), n_embd_s(model)
    for layer in model.layers:
        if layer.is_recurrent and not layer.is_mtp:
            tensors.append(RSTensor(layer.index, "r", F32, (er, rows)))
            tensors.append(RSTensor(layer.index, "s", F32, (es, rows)))
    return RSLayout(rows, tensors)

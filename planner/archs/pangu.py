"""openPangu-Embedded (src/models/pangu-embed.cpp): llama's graph, with a bias on the attention's output
projection (and optional Q/K/V biases); its RoPE takes no frequency factors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.archs.llama import build_llama

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _pangu(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_pangu_embed::load_arch_hparams: the RMS epsilon is required; no experts, no window
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")


read_hparams = _pangu
build_graph = build_llama

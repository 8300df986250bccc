"""GLM-4.5 (src/models/glm4moe.cpp): llama's graph with biased attention and sigmoid-routed experts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_experts,
    use_multi_section_rope,
)
from planner.archs.llama import build_llama
from planner.hparams import (
    GATING_SIGMOID,
)

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _glm4moe(anatomy: ModelAnatomy, meta: Meta) -> None:
    """GLM-4.5: llama's attention (biases), sigmoid-routed experts after the leading dense layers, plus
    an ungated shared expert; multi-token-prediction layers are skipped."""
    read_experts(anatomy, meta)
    if anatomy.experts is not None and not anatomy.experts.gating_func:
        anatomy.experts.gating_func = GATING_SIGMOID  # llama.cpp's default for glm4moe
    use_multi_section_rope(anatomy, meta)  # GLM-4.5V / 4.6V: four positions per token


read_hparams = _glm4moe
build_graph = build_llama

"""The text model of Qwen2-VL (src/models/qwen2vl.cpp): qwen2 in llama's graph with multi-section RoPE
(four positions a token); the output bias, when the file has one, is loaded but not added.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.archs.llama import build_llama
from planner.errors import GGUFError

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _qwen2vl(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_qwen2vl::load_arch_hparams: rope.dimension_sections is required, one number or an
    # array of exactly four; the M-RoPE type gives four positions a token (llama_hparams::n_pos_per_embd)
    require(anatomy, meta, "rope.dimension_sections")
    sections = meta.get("rope.dimension_sections")
    if not isinstance(sections, (int, float)) and len(sections) != 4:
        key = f"{anatomy.architecture}.rope.dimension_sections"
        raise GGUFError(anatomy.path, f"key {key} has wrong array length; expected 4, got {len(sections)}")
    anatomy.n_pos_per_embd = 4


read_hparams = _qwen2vl
build_graph = build_llama

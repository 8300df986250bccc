"""PaddleOCR-VL's text model (src/models/paddleocr.cpp, on ernie4-5.cpp's hyper-parameters and tensors):
ERNIE 4.5's dense layers in llama's graph with multi-section RoPE (four positions a token).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.archs.llama import build_llama
from planner.errors import GGUFError

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _paddleocr(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_ernie4_5::load_arch_hparams: the RMS epsilon is required, rope.dimension_sections optional
    # (one number or four); llama_model_rope_type gives PaddleOCR M-RoPE whatever the sections, so four
    # positions a token (llama_hparams::n_pos_per_embd)
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    sections = meta.get("rope.dimension_sections")
    if isinstance(sections, list) and len(sections) != 4:
        key = f"{anatomy.architecture}.rope.dimension_sections"
        raise GGUFError(anatomy.path, f"key {key} has wrong array length; expected 4, got {len(sections)}")
    anatomy.n_pos_per_embd = 4


read_hparams = _paddleocr
build_graph = build_llama

"""The text model of Qwen3-VL (src/models/qwen3vl.cpp, qwen3vlmoe.cpp): qwen3 (or qwen3moe) in
llama's graph, with deepstack input slices and multi-section RoPE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    plain,
)
from planner.archs.llama import build_llama

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _qwen3vl(anatomy: ModelAnatomy, meta: Meta) -> None:
    # the text model of Qwen3-VL: qwen3 (or qwen3moe) whose first layers add "deepstack" slices of a
    # wider input embedding (n_embd x (1 + n_deepstack_layers)); multi-section RoPE keeps the sizes
    plain(anatomy, meta)
    n_deepstack = meta.int_or("n_deepstack_layers", 0)
    anatomy.n_deepstack = n_deepstack
    anatomy.n_embd_inp = anatomy.n_embd * (1 + n_deepstack)
    anatomy.n_pos_per_embd = 4  # multi-section RoPE: four positions a token


read_hparams = _qwen3vl
build_graph = build_llama

"""Tiny GGUF models, written with gguf.GGUFWriter, that real llama.cpp can load.

Weights are random (quantized types get random blocks with sane scales), the vocabulary is a small
SentencePiece-style list with byte tokens. Each architecture gets the tensors and metadata its
llama.cpp loader asks for.

One module per planner family (tests/support/tiny/<family>.py, as planner/archs/<family>.py) holds
that family's tensors (`layer_tensors`, `global_tensors`) and its zoo specs (`ZOO`); common.py holds
the spec, the writer and the tensors several families share. The writer finds an architecture's
module through planner.archs.FAMILIES when it first writes one; the zoo below gathers every
family's specs (docs/adding-an-architecture.md).
"""

from __future__ import annotations

from importlib import import_module

from tests.support.tiny.common import Shapes, TinySpec, tensors_of, write_tiny_model
from tests.support.tiny.llama import ENDLESS

__all__ = ["ENDLESS", "FAMILIES", "ZOO", "Shapes", "TinySpec", "tensors_of", "write_tiny_model"]

# the tiny-model module of every family in planner.archs.FAMILIES (tests/planner/test_families.py checks)
FAMILIES: tuple[str, ...] = (
    "llama",
    "qwen2vl",
    "qwen3vl",
    "glm4",
    "hunyuan",
    "glm4moe",
    "phi3",
    "apertus",
    "olmo",
    "olmo2",
    "exaone_moe",
    "cohere2",
    "gemma",
    "gemma3n",
    "gemma4",
    "gpt_oss",
    "llama4",
    "deepseek2",
    "deepseek32",
    "mamba",
    "lfm2",
    "granite",
    "granite_hybrid",
    "jamba",
    "rwkv",
    "qwen3next",
    "falcon_h1",
    "nemotron_h",
    "plamo2",
    "classic",
    "plamo3",
    "muse_glimmer",
    "maple",
    "cohere2moe",
    "granite_switch",
    "moe_decoders",
    "deci",
    "bitnet",
    "minicpm3",
    "dots1",
    "pangu",
    "talkie",
    "smallthinker",
    "grovemoe",
    "paddleocr",
    "spark2_5",
    "cogvlm",
    "chameleon",
    "llama_embed",
    "afmoe",
    "laguna",
    "granite_swa",
    "hrm_text",
    "mimo2",
    "step35",
    "kimi_linear",
    "bailingmoe3",
    "nanbeige",
    "minimax01",
)

# A zoo of small models covering the architectures and tensor types the planner supports.
ZOO: dict[str, TinySpec] = {
    name: spec for family in FAMILIES for name, spec in import_module(f"tests.support.tiny.{family}").ZOO.items()
}

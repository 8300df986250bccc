"""The architectures the planner knows exactly: one family module each, imported when first needed.

A family module (planner/archs/<family>.py) holds what llama.cpp's `src/models/<arch>.cpp` and
`load_arch_hparams` say about its architectures:
- `read_hparams(anatomy, meta)`: what the generic reader cannot know: which layers use a sliding
  window, experts, recurrent layers, the family's typed hyper-parameters (planner.hparams);
- `build_graph(ctx)`: the graph llama.cpp reserves compute buffers for, op by op.

An architecture without a family still gets a plan, marked as an estimate until llama.cpp's dry
run confirms it at load (app.engine.verify). Adding one is a family module and a line here
(docs/adding-an-architecture.md).
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.graphs.context import GraphContext
    from planner.meta import Meta
    from planner.model import ModelAnatomy

# architecture (general.architecture) -> family module in planner.archs
FAMILIES: dict[str, str] = {
    "llama": "llama",
    # llama's tensors and graph shape (exaone, smollm3 with its RoPE-less layers, ernie4_5, minicpm
    # with its scales, internlm2, xverse, seed_oss, arcee, orion, starcoder2, stablelm ...)
    "exaone": "llama",
    "smollm3": "llama",
    "ernie4_5": "llama",
    "minicpm": "llama",
    "internlm2": "llama",
    "xverse": "llama",
    "seed_oss": "llama",  # its FFN pre-norm is named post_attention_norm
    "arcee": "llama",  # a ReLU² FFN without a gate
    "orion": "llama",  # layer norms with biases
    "starcoder2": "llama",  # biases everywhere, a GELU FFN without a gate
    "stablelm": "llama",  # layer norms with biases, partial RoPE (same sizes)
    "gpt2": "llama",  # learned position embeddings instead of RoPE, biases, a GELU FFN
    "starcoder": "llama",  # GPT-2's shape with multi-query attention
    "mistral3": "llama",
    "qwen2": "llama",
    "qwen3": "llama",
    "qwen2moe": "llama",
    "qwen3moe": "llama",
    "ernie4_5-moe": "llama",  # softmax routing with a selection bias, an ungated shared expert
    "minimax-m2": "llama",  # OLMoE's flat Q/K norms, routing from the header with a selection bias
    "olmoe": "llama",
    "qwen2vl": "qwen2vl",
    "qwen3vl": "qwen3vl",
    "qwen3vlmoe": "qwen3vl",
    "qwen3tts": "qwen3vl",  # Qwen3-TTS's talker: Qwen3-VL's text model with a 3,072-token output
    "glm4": "glm4",
    "hunyuan-dense": "hunyuan",
    "hunyuan_vl": "hunyuan",  # multi-section RoPE with rope.dimension_sections
    "hunyuan-moe": "hunyuan",  # a shared expert beside softmax-routed experts
    "maincoder": "hunyuan",  # Q's norm before K's
    "glm4moe": "glm4moe",
    "phi3": "phi3",
    "apertus": "apertus",
    "olmo": "olmo",
    "olmo2": "olmo2",
    "exaone4": "olmo2",
    "exaone-moe": "exaone_moe",
    "cohere2": "cohere2",
    "command-r": "cohere2",
    "falcon": "cohere2",  # attention and FFN side by side
    "phi2": "cohere2",  # attention and FFN side by side
    "gemma": "gemma",
    "gemma2": "gemma",
    "gemma3": "gemma",
    "gemma3n": "gemma3n",
    "gemma4": "gemma4",
    "gpt-oss": "gpt_oss",
    "llama4": "llama4",
    "deepseek2": "deepseek2",
    "mistral4": "deepseek2",  # llama.cpp builds it as deepseek2 (latent attention, experts), plain RoPE
    "deepseek32": "deepseek32",
    "mamba": "mamba",
    "mamba2": "mamba",
    "lfm2": "lfm2",
    "lfm2moe": "lfm2",  # LFM2 with routed experts after the leading dense layers
    "granite": "granite",
    "granitemoe": "granite",
    "granitehybrid": "granite_hybrid",
    "jamba": "jamba",
    "rwkv6": "rwkv",
    "rwkv7": "rwkv",
    "qwen3next": "qwen3next",
    "qwen35": "qwen3next",
    "qwen35moe": "qwen3next",
    "falcon-h1": "falcon_h1",
    "nemotron_h": "nemotron_h",
    "nemotron_h_moe": "nemotron_h",
    "plamo2": "plamo2",
    "baichuan": "classic",
    "refact": "classic",
    "bloom": "classic",
    "mpt": "classic",
    "gptneox": "classic",
    "qwen": "classic",
    "codeshell": "classic",
    "jais": "classic",
    "jais2": "classic",
    "nemotron": "classic",
    "plamo": "classic",
    "chatglm": "classic",
    "openelm": "classic",
    "plamo3": "plamo3",
    "muse-glimmer": "muse_glimmer",
    "maple": "maple",
    "cohere2moe": "cohere2moe",
    "deepseek2-ocr": "deepseek2",
    "glm-dsa": "deepseek32",
    "graniteswitch": "granite_switch",
    "deepseek": "moe_decoders",
    "arctic": "moe_decoders",
    "dbrx": "moe_decoders",
    "grok": "moe_decoders",
    "phimoe": "phi3",
    "deci": "deci",
    "bitnet": "bitnet",
    "minicpm3": "minicpm3",
    "rwkv6qwen2": "rwkv",
    "arwkv7": "rwkv",
    "dots1": "dots1",
    "bailingmoe": "dots1",  # no Q/K norms, experts on every layer, softmax routing
    "bailingmoe2": "dots1",  # a fused QKV, multi-token-prediction layers skipped
    "mellum": "dots1",  # a window on 3 of every 4 layers, no shared expert
    "hy_v3": "dots1",  # output rows picked after the output norm, multi-token-prediction layers skipped
    "pangu-embedded": "pangu",
    "talkie": "talkie",
    "smallthinker": "smallthinker",
    "grovemoe": "grovemoe",
    "paddleocr": "paddleocr",
    "spark2_5": "spark2_5",
    "cogvlm": "cogvlm",
    "chameleon": "chameleon",
    "llama-embed": "llama_embed",
    "afmoe": "afmoe",
    "laguna": "laguna",
    "granite_swa": "granite_swa",
    "hrm_text": "hrm_text",
    "mimo2": "mimo2",
    "step35": "step35",
    "kimi-linear": "kimi_linear",
    "bailingmoe3": "bailingmoe3",
    "nanbeige": "nanbeige",
    "minimax-01": "minimax01",
}

# llama_model::create_memory gives these no KV cache at all: text encoders (embedding models),
# diffusion language models and an audio decoder. What each is for, in words.
NO_CACHE_ARCHS: dict[str, str] = {
    **dict.fromkeys(
        (
            "bert",
            "modern-bert",
            "nomic-bert",
            "nomic-bert-moe",
            "neo-bert",
            "jina-bert-v2",
            "jina-bert-v3",
            "eurobert",
            "gemma-embedding",
        ),
        "an embedding model (it turns text into vectors)",
    ),
    **dict.fromkeys(("dream", "llada", "llada-moe", "rnd1"), "a diffusion language model"),
    "wavtokenizer-dec": "an audio decoder",
}


def family(architecture: str) -> ModuleType | None:
    """The family module of an architecture the planner knows exactly, else None."""
    name = FAMILIES.get(architecture)
    return import_module(f"planner.archs.{name}") if name else None


# planned exactly (they keep a KV cache), yet made for something else than a chat
NOT_CHAT_ARCHS: dict[str, str] = {
    "llama-embed": NO_CACHE_ARCHS["bert"],
    "qwen3tts": "a text-to-speech model's talker (it writes audio codes, not text)",
}


def not_for_chat(architecture: str) -> str | None:
    """Why a model of this architecture cannot hold a chat, or None when it can."""
    purpose = NO_CACHE_ARCHS.get(architecture) or NOT_CHAT_ARCHS.get(architecture)
    return f"{purpose}, not a chat model" if purpose else None


def _no_cache(anatomy: ModelAnatomy) -> None:
    for layer in anatomy.layers:
        layer.has_kv = False
    anatomy.no_cache = True  # no graph builder either: the compute buffer is estimated
    anatomy.exact = False
    anatomy.notes.append(
        f"architecture '{anatomy.architecture}' is {NO_CACHE_ARCHS[anatomy.architecture]}: llama.cpp keeps no "
        "KV cache for it; weights are exact, the compute buffer is estimated"
    )


def apply_arch_rules(anatomy: ModelAnatomy, meta: Meta) -> None:
    """The family's header rule, or the estimate's defaults for an architecture without one."""
    if anatomy.architecture in NO_CACHE_ARCHS:
        _no_cache(anatomy)
        return
    module = family(anatomy.architecture)
    if module is None:
        from planner.archs.common import read_experts

        anatomy.exact = False
        anatomy.notes.append(
            f"architecture '{anatomy.architecture}' has no exact rules in this planner yet: "
            "figures assume dense attention on every layer and are estimates"
        )
        # a sliding window declared in the header is honoured as a standard window on every layer
        read_experts(anatomy, meta)
        return
    module.read_hparams(anatomy, meta)


def build_model_graph(ctx: GraphContext) -> None:
    """The family's graph; an architecture without a family is priced in llama's shape (an estimate)."""
    module = family(ctx.model.architecture) or import_module("planner.archs.llama")
    module.build_graph(ctx)

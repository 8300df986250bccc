"""Model anatomy: what a GGUF header says about the model, in llama.cpp's terms.

`ModelAnatomy` holds the hyper-parameters llama.cpp derives in `load_hparams`
(per-layer head counts, head sizes, sliding windows, recurrent layers) and the
model's tensors grouped the way llama.cpp places them: the input layer (always
on the host), the repeating layers, and the output layer (which counts as one
unit of `n_gpu_layers`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planner.errors import ModelError
from planner.gguf import TensorInfo

if TYPE_CHECKING:
    from planner.hparams import (
        AltUp,
        Experts,
        GraniteScales,
        KimiDeltaAttention,
        LatentAttention,
        Rwkv,
        SparseIndexer,
        StateSpace,
    )

_LAYER_RE = re.compile(r"^blk\.(\d+)\.")

# Tensors llama.cpp assigns to the input layer (LLM_TENSOR_LAYER_INPUT): kept on the host.
INPUT_TENSOR_PREFIXES = ("token_embd.", "position_embd.", "token_types.", "per_layer_token_embd.")
# Tensors of the output layer (LLM_TENSOR_LAYER_OUTPUT).
OUTPUT_TENSOR_PREFIXES = (
    "output.",
    "output_norm.",
    "cls.",
    "cls_out.",
    "cls_norm.",
    "dense_2.",
    "dense_3.",
    "enc.output_norm.",
    "dec.output_norm.",
)

# llama_ftype (include/llama.h) as written in general.file_type
FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
    41: "Q2_0",
}

SWA_NONE, SWA_STANDARD, SWA_CHUNKED, SWA_SYMMETRIC = "none", "standard", "chunked", "symmetric"


@dataclass
class LayerAnatomy:
    """One layer's tensors and attention shape, as llama.cpp's loader sees them."""

    index: int
    tensors: list[TensorInfo] = field(default_factory=list)
    n_head: int = 0
    n_head_kv: int = 0
    head_dim_k: int = 0
    head_dim_v: int = 0
    n_ff: int = 0
    is_swa: bool = False
    is_recurrent: bool = False
    has_kv: bool = True
    # attention beside the recurrent mixer in the same layer (falcon-h1): a KV cache as well as a state
    kv_beside_rs: bool = False
    # a multi-token-prediction layer: its tensors are skipped unless MTP is loaded
    is_mtp: bool = False

    @property
    def weight_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    @property
    def caches_kv(self) -> bool:
        """Whether llama.cpp's KV cache holds this layer (a recurrent layer only with attention beside it)."""
        return self.has_kv and (not self.is_recurrent or self.kv_beside_rs)

    @property
    def n_embd_k_gqa(self) -> int:
        return self.head_dim_k * self.n_head_kv

    @property
    def n_embd_v_gqa(self) -> int:
        return self.head_dim_v * self.n_head_kv

    def tensor(self, suffix: str) -> TensorInfo | None:
        """The layer's tensor `blk.<i>.<suffix>`, if the file has it."""
        name = f"blk.{self.index}.{suffix}"
        for t in self.tensors:
            if t.name == name:
                return t
        return None


@dataclass
class ModelAnatomy:
    """What the planner knows of a model from its header: hyper-parameters, layers, tensors."""

    path: str
    architecture: str
    name: str
    file_bytes: int
    n_params: int
    n_layer: int
    n_ctx_train: int
    n_embd: int
    n_vocab: int
    layers: list[LayerAnatomy]
    input_tensors: list[TensorInfo]
    output_tensors: list[TensorInfo]
    other_tensors: list[TensorInfo]
    tied_output: bool
    n_swa: int = 0
    swa_type: str = SWA_NONE
    rope_dims: int = 0
    f_attn_softcap: float = 0.0
    f_final_softcap: float = 0.0
    # Architectures whose memory rules the planner knows exactly; others are estimates.
    exact: bool = True
    notes: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    # llama_hparams fields a few families set (planner/archs/<family>.py)
    f_logit_scale: float = 0.0
    f_attn_temp_scale: float = 0.0  # queries scaled by position (an inp_attn_scale input)
    f_clamp_kqv: float = 0.0  # Q, K and V clamped to +-f_clamp_kqv after their projections (OLMo)
    # per-layer SwiGLU limits of the experts and of the other gated FFNs (0: none), llama_hparams'
    # swiglu_clamp_exp / swiglu_clamp_shexp (Step 3.5, Ling 3 ...): each adds clamp nodes to the graph
    swiglu_clamp_exp: list[float] = field(default_factory=list)
    swiglu_clamp_shexp: list[float] = field(default_factory=list)
    use_rope: bool = True
    n_pos_per_embd: int = 1  # 4 with multi-section RoPE
    n_deepstack: int = 0  # Qwen3-VL's input slices added to the first layers
    n_embd_inp: int = 0  # the input embedding's width when wider than n_embd
    n_embd_per_layer: int = 0  # per-layer input embeddings (Gemma 3n, Gemma 4)
    n_layer_kv_from_start: int = 0  # layers past it reuse an earlier layer's cache (Gemma 3n, Gemma 4)
    n_no_rope_layer_step: int = 0  # every n-th layer without RoPE (Llama 4)
    use_kq_norm: bool = True
    flash_attn_off: bool = False  # llama_init_from_model forces flash attention off (Grok)
    # a plain llama_kv_cache without a layer filter: layers without KV heads get a zero-width K and,
    # stored transposed, a V of the widest width all the same (Deci's attention-free layers)
    kv_on_every_layer: bool = False
    # the LM head multiplies by token_embd itself, no duplicated output tensor (BitNet)
    output_is_token_embd: bool = False
    shortconv_l_cache: int = 0  # LFM2's short convolution
    n_embd_head_la: int = 0  # MiniMax-01's lightning-attention head: its layers' state is head x head a head
    no_cache: bool = False  # llama.cpp keeps no KV cache (embedding and diffusion models)
    # tensors of a multi-token-prediction block that its family creates without the block's skip flag
    # (names after "blk.N.", by prefix): llama.cpp loads them, on the block's device, though it skips the block
    mtp_loaded: tuple[str, ...] = ()
    # the layers llama.cpp creates rope_freqs for (one copy on each of their devices); None: every layer
    rope_freqs_layers: tuple[int, ...] | None = None
    # typed records of the families that have them (planner.hparams); None where a model has none
    experts: Experts | None = None
    ssm: StateSpace | None = None
    kda: KimiDeltaAttention | None = None
    mla: LatentAttention | None = None
    indexer: SparseIndexer | None = None
    rwkv: Rwkv | None = None
    granite: GraniteScales | None = None
    altup: AltUp | None = None

    @property
    def n_expert(self) -> int:
        return self.experts.n_expert if self.experts else 0

    # The families' records, narrowed: a graph that needs one reads it here, and a model without it
    # stops with the reason llama.cpp gives (the family's header rule fills the record it needs).

    @property
    def moe(self) -> Experts:
        """The experts of a model whose graph has expert tensors (llama.cpp needs their count)."""
        if self.experts is None:
            problem = f"expert tensors without {self.architecture}.expert_count (llama.cpp refuses it)"
            raise ModelError(self.path, problem)
        return self.experts

    @property
    def state_space(self) -> StateSpace:
        """The sizes of a Mamba-style mixer (llama.cpp requires them of every family that has one)."""
        if self.ssm is None:
            keys = "conv_kernel, inner_size, state_size and time_step_rank"
            problem = f"a state-space mixer without {self.architecture}.ssm.{keys} (llama.cpp refuses it)"
            raise ModelError(self.path, problem)
        return self.ssm

    @property
    def latent_attention(self) -> LatentAttention:
        """DeepSeek's latent attention sizes (llama.cpp requires attention.kv_lora_rank)."""
        if self.mla is None:
            problem = f"latent attention without {self.architecture}.attention.kv_lora_rank (llama.cpp refuses it)"
            raise ModelError(self.path, problem)
        return self.mla

    @property
    def sparse_indexer(self) -> SparseIndexer:
        """The sparse-attention indexer's sizes (llama.cpp requires its head count, key length and top k)."""
        if self.indexer is None:
            keys = "head_count, key_length and top_k"
            problem = f"sparse attention without {self.architecture}.attention.indexer.{keys} (llama.cpp refuses it)"
            raise ModelError(self.path, problem)
        return self.indexer

    @property
    def rwkv_hparams(self) -> Rwkv:
        """RWKV's head size and token shift (llama.cpp requires wkv.head_size)."""
        if self.rwkv is None:
            problem = f"an RWKV mixer without {self.architecture}.wkv.head_size (llama.cpp refuses it)"
            raise ModelError(self.path, problem)
        return self.rwkv

    @property
    def granite_scales(self) -> GraniteScales:
        """Granite's scales. llama.cpp reads them as optional (0: no node), so a graph that needs them
        on a model without the record is a family whose header rule forgot them."""
        if self.granite is None:
            problem = f"{self.architecture}: Granite's layers without Granite's scales (the family's rule read none)"
            raise ModelError(self.path, problem)
        return self.granite

    @property
    def alt_up(self) -> AltUp:
        """Gemma 3n's AltUp sizes. They are llama.cpp's fixed values, not the header's, so a graph that
        needs them on a model without the record is a family whose header rule forgot them."""
        if self.altup is None:
            problem = f"{self.architecture}: Gemma 3n's layers without their AltUp sizes (the family's rule set none)"
            raise ModelError(self.path, problem)
        return self.altup

    @property
    def latent_cache(self) -> bool:
        """Whether the KV cache holds DeepSeek's compressed latent (no V)."""
        return self.mla is not None and self.mla.latent_cache

    def tensor(self, name: str) -> TensorInfo | None:
        for group in (self.input_tensors, self.output_tensors, self.other_tensors):
            for t in group:
                if t.name == name:
                    return t
        return None

    @property
    def n_layer_nextn(self) -> int:
        return sum(1 for layer in self.layers if layer.is_mtp)

    @property
    def n_trunk(self) -> int:
        """Layers the graph runs (llama_hparams::n_layer(): all blocks but the MTP ones)."""
        return self.n_layer - self.n_layer_nextn

    @property
    def trunk_layers(self) -> list[LayerAnatomy]:
        return [layer for layer in self.layers if not layer.is_mtp]

    @property
    def weight_bytes(self) -> int:
        return (
            sum(layer.weight_bytes for layer in self.layers if not layer.is_mtp)
            + sum(t.n_bytes for t in self.input_tensors)
            + sum(t.n_bytes for t in self.output_tensors)
            + sum(t.n_bytes for t in self.other_tensors)
        )

    @property
    def has_swa(self) -> bool:
        return self.swa_type != SWA_NONE and any(layer.is_swa for layer in self.layers)

    @property
    def kv_layers(self) -> list[LayerAnatomy]:
        return [layer for layer in self.layers if layer.caches_kv]

    @property
    def n_embd_v_gqa_max(self) -> int:
        return max((layer.n_embd_v_gqa for layer in self.layers), default=0)

    @property
    def quantization(self) -> str:
        """The file's quantization as llama.cpp names it (general.file_type), else the dominant type."""
        ftype = self.metadata.get("general.file_type")
        if isinstance(ftype, int) and ftype in FILE_TYPES:
            return FILE_TYPES[ftype]
        counts: dict[str, int] = {}
        for layer in self.layers:
            for t in layer.tensors:
                if len(t.shape) >= 2:
                    counts[t.type.name] = counts.get(t.type.name, 0) + t.n_bytes
        if not counts:
            return "unknown"
        return max(counts.items(), key=lambda kv: kv[1])[0].upper()


def swa_pattern(n_layer: int, n_pattern: int, dense_first: bool = False) -> list[bool]:
    """llama_hparams::set_swa_pattern: which layers use the sliding window."""
    if dense_first:
        return [n_pattern == 0 or il % n_pattern != 0 for il in range(n_layer)]
    return [n_pattern == 0 or il % n_pattern < n_pattern - 1 for il in range(n_layer)]

"""Typed hyper-parameter records for the families that have them (llama_hparams' grouped fields).

A family's rule (planner/archs/<family>.py) fills the records its models use; the anatomy
holds `None` for the others, so that a reader never gets a silent default for a
hyper-parameter nobody read from the header.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# llama_expert_gating_func_type, and the router's activation as the graph names it
GATING_SOFTMAX, GATING_SIGMOID = 1, 2
GATING_NAMES = {1: "softmax", 2: "sigmoid", 3: "softmax_weight", 4: "sqrt_softplus"}


@dataclass
class Experts:
    """Mixture of experts (expert_count, expert_used_count and the routers' switches)."""

    n_expert: int
    n_used: int
    n_shared: int = 0
    weights_scale: float = 0.0
    weights_norm: bool = False
    gating_func: int = 0  # 0 when the header names none: each family has its own default
    n_groups: int = 0  # grouped routing (DeepSeek V3, Nemotron-H)
    n_group_used: int = 0
    n_layer_dense_lead: int = 0  # leading layers with a dense FFN (DeepSeek)
    moe_layer_step: int = 0  # experts on every n-th layer only (Llama 4)
    n_used_per_layer: list[int] = field(default_factory=list)  # top-k that differs per layer (Nemotron-H MoE)
    n_per_chunk: int = 0  # GroveMoE: experts per group, each group with one small chunk expert

    @property
    def gating(self) -> str:
        """The router's activation as the graph names it (none in the header: softmax)."""
        return GATING_NAMES.get(self.gating_func, "softmax")


@dataclass
class StateSpace:
    """Mamba-style mixers: conv kernel, inner and state sizes, heads (dt rank), groups."""

    d_conv: int
    d_inner: int
    d_state: int
    dt_rank: int
    n_group: int
    dt_b_c_rms: bool = False


@dataclass
class KimiDeltaAttention:
    """Kimi Delta Attention (Kimi Linear's recurrent layers): the heads' size and the Q/K/V convolutions' kernel."""

    head_dim: int
    d_conv: int


@dataclass
class LatentAttention:
    """DeepSeek's multi-head latent attention: low-rank Q and KV projections."""

    n_lora_q: int
    n_lora_kv: int
    head_k: int
    head_v: int
    latent_cache: bool  # the KV cache holds the compressed latent only (key/value_length_mla present)


@dataclass
class SparseIndexer:
    """DeepSeek V3.2's lightning indexer (DSA): its heads, key size and the cells it keeps."""

    n_head: int
    head_size: int
    top_k: int
    # the layers whose indexer runs (GLM DSA: the others reuse the top k of the last one that ran);
    # empty: every layer's
    full: tuple[bool, ...] = ()

    def runs(self, il: int) -> bool:
        return not self.full or self.full[il]


@dataclass
class Rwkv:
    """RWKV-6 / RWKV-7: WKV head size, token-shift count, the RWKV-6 rescaling period."""

    head_size: int
    token_shift_count: int = 2
    rescale_every_n_layers: int = 0


@dataclass
class GraniteScales:
    """Granite's scales, each a ggml_scale node in the graph (0 means the node is absent)."""

    residual: float = 0.0
    embedding: float = 0.0
    attention: float = 0.0


@dataclass
class AltUp:
    """Gemma 3n's fixed AltUp / Laurel / sparsity sizes (llama_hparams' defaults, not in the header)."""

    n_altup: int = 4
    i_act: int = 0
    laurel_rank: int = 64
    n_embd_altup: int = 256
    n_layer_sparsity: int = 10  # layers whose FFN gate keeps only its top 5 % (gaussian_topk)

"""A load configuration and llama.cpp's normalisation of it (llama_context constructor)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from planner.errors import ConfigError
from planner.ggml_types import KV_CACHE_TYPES, GGMLType, ggml_type
from planner.model import ModelAnatomy
from planner.units import round_up

CTX_PAD = 256


@dataclass(frozen=True)
class LoadConfig:
    """What vramchat passes to llama.cpp. n_gpu_layers counts the output layer as one unit."""

    n_gpu_layers: int = 0
    n_ctx: int = 4096
    n_batch: int = 512
    n_ubatch: int = 512
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = False
    swa_full: bool = False
    n_seq_max: int = 1
    kv_unified: bool = False
    offload_kqv: bool = True
    use_mmap: bool = True
    tensor_split: tuple[float, ...] = ()
    # experts of the first N layers kept on the CPU (llama.cpp's --n-cpu-moe)
    n_cpu_moe: int = 0
    # let a GPU run large ops whose weights stay in host memory (llama.cpp's op_offload)
    op_offload: bool = True
    # the CPU backend's extra buffer types for host weights (CPU_REPACK, AMX: llama.cpp's
    # use_extra_bufts); None: on, except on CPUs with AMX (see planner.weights.uses_cpu_extra_buffers)
    cpu_extra_buffers: bool | None = None

    def with_(self, **changes: Any) -> LoadConfig:  # Any: each field has its own type
        return replace(self, **changes)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["tensor_split"] = list(self.tensor_split) or [1.0]
        return data


@dataclass(frozen=True)
class Resolved:
    """The configuration as llama.cpp will actually run it."""

    config: LoadConfig
    n_ctx: int  # padded to 256 (and to a multiple of n_seq_max when not unified)
    n_ctx_seq: int  # cells per stream
    n_batch: int
    n_ubatch: int
    n_seq_max: int
    n_stream: int
    n_gpu_layers: int  # clamped to n_layer + 1
    type_k: GGMLType
    type_v: GGMLType

    @property
    def reserve_tokens(self) -> int:
        """Tokens of the worst-case micro-batch the compute buffers are reserved for."""
        return min(self.n_ctx, self.n_ubatch)


def resolve(model: ModelAnatomy, config: LoadConfig) -> Resolved:
    """Apply llama.cpp's rules, refusing what llama.cpp refuses, with its reason."""
    for name, value in (("type_k", config.type_k), ("type_v", config.type_v)):
        if value not in KV_CACHE_TYPES:
            raise ConfigError(
                f"{name} {value!r} is not a KV cache type llama.cpp accepts ({', '.join(KV_CACHE_TYPES)})"
            )
    type_k, type_v = ggml_type(config.type_k), ggml_type(config.type_v)
    fa_forced_off = config.flash_attn and model.flash_attn_off
    if fa_forced_off:
        config = config.with_(flash_attn=False)  # "flash_attn is not compatible with Grok - forcing off"
    if model.latent_cache and type_k is not type_v:
        raise ConfigError(
            f"this model (multi-head latent attention) needs the same K and V cache types; "
            f"llama.cpp refuses K {type_k.name} with V {type_v.name}"
        )
    if type_v.is_quantized and not config.flash_attn:
        why = f" (it turns flash attention off for {model.architecture})" if fa_forced_off else ""
        raise ConfigError(
            "a quantized V cache needs flash attention: llama.cpp refuses "
            f"type_v={type_v.name} with flash attention off{why}"
        )
    # llama_init_from_model checks the head sizes against the cache types' blocks only with flash
    # attention, over every layer the graph runs (recurrent ones included). Without it a quantized K
    # cache of any head size loads as long as each layer's K row (all its KV heads) fills whole
    # blocks; a shorter row makes the graph's view of the cache overrun it, and ggml aborts.
    if not config.flash_attn:
        for layer in model.kv_layers:
            if layer.n_embd_k_gqa % type_k.block_size:
                raise ConfigError(
                    f"K cache type {type_k.name} without flash attention needs K rows that are a multiple of "
                    f"{type_k.block_size} values; layer {layer.index} has {layer.n_embd_k_gqa} "
                    "(llama.cpp would abort)"
                )
    for layer in model.trunk_layers if config.flash_attn else ():
        if layer.head_dim_k % type_k.block_size:
            raise ConfigError(
                f"K cache type {type_k.name} needs a head size that is a multiple of "
                f"{type_k.block_size}; layer {layer.index} has {layer.head_dim_k}"
            )
        if layer.head_dim_v % type_v.block_size:
            raise ConfigError(
                f"V cache type {type_v.name} needs a head size that is a multiple of "
                f"{type_v.block_size}; layer {layer.index} has {layer.head_dim_v}"
            )
    if config.n_ctx < 0:
        raise ConfigError(f"context length {config.n_ctx} is negative")
    if config.n_batch < 1 or config.n_ubatch < 1:
        raise ConfigError("batch and micro-batch sizes must be at least 1")
    if not 1 <= config.n_seq_max <= 256:
        raise ConfigError(f"parallel sequences must be between 1 and 256 (got {config.n_seq_max})")

    n_ctx = config.n_ctx or model.n_ctx_train or 4096
    n_batch = min(n_ctx, config.n_batch)
    n_ubatch = min(n_batch, config.n_ubatch)
    n_ctx = round_up(n_ctx, CTX_PAD)
    n_seq = config.n_seq_max
    if config.kv_unified:
        n_ctx_seq = n_ctx
    else:
        n_ctx_seq = round_up(n_ctx // n_seq, CTX_PAD)
        n_ctx = n_ctx_seq * n_seq
    n_gpu_layers = model.n_layer + 1 if config.n_gpu_layers < 0 else min(config.n_gpu_layers, model.n_layer + 1)
    return Resolved(
        config=config,
        n_ctx=n_ctx,
        n_ctx_seq=n_ctx_seq,
        n_batch=n_batch,
        n_ubatch=n_ubatch,
        n_seq_max=n_seq,
        n_stream=1 if config.kv_unified else n_seq,
        n_gpu_layers=n_gpu_layers,
        type_k=type_k,
        type_v=type_v,
    )

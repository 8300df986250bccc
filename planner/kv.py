"""KV cache layout (llama_kv_cache, llama_kv_cache_iswa): which layers, how many cells, what size.

Per attention layer llama.cpp creates K as [n_embd_k_gqa, cells, streams] and V
as [n_embd_v_gqa, cells, streams] (V at the widest layer's width when it is
stored transposed, i.e. without flash attention). Sliding-window layers get a
smaller cache of PAD(min(cells, n_swa * n_seq_or_1 + n_ubatch), 256) cells
unless swa_full is set.

DeepSeek V3.2's sparse attention (llama_kv_cache_dsa) adds a second, K-only cache
beside the latent one: the lightning indexer's keys, one head of
indexer_head_size values per cell, on the same trunk layers, in the K type.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.config import Resolved
from planner.ggml_types import GGMLType
from planner.model import LayerAnatomy, ModelAnatomy
from planner.units import round_up


@dataclass(frozen=True)
class KVTensor:
    """One K, V (or indexer key) tensor of the KV cache."""

    layer: int
    swa: bool
    kind: str  # "k", "v", or "lid" (the indexer's key cache of sparse attention)
    type: GGMLType
    ne: tuple[int, int, int]

    @property
    def nbytes(self) -> int:
        return self.type.row_bytes(self.ne[0]) * self.ne[1] * self.ne[2]


@dataclass(frozen=True)
class KVLayout:
    """The KV cache of one configuration: cells, streams and every tensor."""

    cells: int  # cells per stream of the full-attention cache
    cells_swa: int  # cells per stream of the sliding-window cache (0 when there is none)
    n_stream: int
    tensors: list[KVTensor]

    def for_layer(self, il: int) -> list[KVTensor]:
        return [t for t in self.tensors if t.layer == il]

    def bytes_per_cell(self, swa: bool) -> int:
        """Bytes one cell (one token of one stream) takes across the layers of one cache."""
        return sum(t.type.row_bytes(t.ne[0]) for t in self.tensors if t.swa == swa)


def swa_cells(model: ModelAnatomy, r: Resolved) -> int:
    if not model.has_swa:
        return 0
    if r.config.swa_full:
        return r.n_ctx_seq
    per_seq = model.n_swa * (r.n_seq_max if r.config.kv_unified else 1)
    return round_up(min(r.n_ctx_seq, per_seq + r.n_ubatch), 256)


def kv_layout(model: ModelAnatomy, r: Resolved) -> KVLayout:
    """The KV tensors of one configuration. With multi-head latent attention only K is cached."""
    is_mla = model.latent_cache
    v_trans = not r.config.flash_attn
    v_width_max = model.n_embd_v_gqa_max
    cells_swa = swa_cells(model, r)
    iswa = model.has_swa
    tensors: list[KVTensor] = []
    for layer in kv_cache_layers(model):
        swa = iswa and layer.is_swa
        cells = cells_swa if swa else r.n_ctx_seq
        tensors.append(KVTensor(layer.index, swa, "k", r.type_k, (layer.n_embd_k_gqa, cells, r.n_stream)))
        if not is_mla:
            width = v_width_max if v_trans else layer.n_embd_v_gqa
            tensors.append(KVTensor(layer.index, swa, "v", r.type_v, (width, cells, r.n_stream)))
    tensors += _indexer_tensors(model, r)
    return KVLayout(r.n_ctx_seq, cells_swa, r.n_stream, tensors)


def _indexer_tensors(model: ModelAnatomy, r: Resolved) -> list[KVTensor]:
    """The indexer key cache of sparse attention (llama_kv_cache_dsa's second llama_kv_cache): one
    KV head of the indexer's size, as many cells as the main cache, no V."""
    indexer = model.indexer
    if indexer is None or not indexer.head_size:
        return []
    return [
        KVTensor(layer.index, False, "lid", r.type_k, (indexer.head_size, r.n_ctx_seq, r.n_stream))
        for layer in kv_cache_layers(model)
        if indexer.runs(layer.index)  # GLM DSA: only the layers whose indexer runs keep its keys
    ]


def kv_cache_layers(model: ModelAnatomy) -> list[LayerAnatomy]:
    """Layers that own K/V tensors: attention layers that have KV (not shared, not purely recurrent)."""
    return [layer for layer in model.layers if layer.caches_kv and (layer.n_head_kv > 0 or model.kv_on_every_layer)]

"""The model's anatomy from its GGUF header: llama.cpp's load_hparams, and its metadata accessor.

`planner.model` holds the types; the per-architecture rules (`planner.archs`) are applied here,
after the generic reading, so that neither of those two modules imports the other's loader.
"""

from __future__ import annotations

from planner import archs
from planner.errors import GGUFError
from planner.gguf import GGUFModel, TensorInfo
from planner.meta import Meta
from planner.model import (
    _LAYER_RE,
    INPUT_TENSOR_PREFIXES,
    OUTPUT_TENSOR_PREFIXES,
    LayerAnatomy,
    ModelAnatomy,
)

# tensors outside blk.N that llama.cpp creates as block 0's (LLM_TENSOR_LAYER_REPEATING, bid 0): the
# embeddings' norm (bloom, the BERTs, RWKV) and HRM's initial low-level state
FIRST_LAYER_TENSORS = ("token_embd_norm.", "hrm.z_l_init")


def _vocab_size(gguf: GGUFModel, meta: Meta) -> int:
    tokens = gguf.metadata.get("tokenizer.ggml.tokens")
    if tokens is not None:
        return len(tokens)
    size = meta.get("vocab_size")
    if isinstance(size, int):
        return size
    embd = gguf.tensors.get("token_embd.weight")
    if embd is not None and len(embd.shape) >= 2:
        return embd.shape[1]
    raise GGUFError(gguf.path, "cannot tell the vocabulary size: no tokenizer.ggml.tokens and no token_embd")


def _checked_vocab(gguf: GGUFModel, meta: Meta) -> int:
    n_vocab = _vocab_size(gguf, meta)
    if not 0 < n_vocab <= 1 << 24:
        raise GGUFError(gguf.path, f"vocabulary size {n_vocab} is out of range")
    return n_vocab


def load_anatomy(gguf: GGUFModel) -> ModelAnatomy:
    """Build the model's anatomy from its header, following llama.cpp's load_hparams."""
    arch = gguf.architecture
    if not arch:
        raise GGUFError(gguf.path, "metadata has no general.architecture")
    meta = Meta(gguf, arch)

    n_layer = meta.require_int("block_count")
    if not 0 < n_layer <= 512:
        raise GGUFError(gguf.path, f"{arch}.block_count {n_layer} is out of range")
    n_embd = meta.require_int("embedding_length")
    if not 0 < n_embd <= 1 << 20:
        raise GGUFError(gguf.path, f"{arch}.embedding_length {n_embd} is out of range")
    n_ctx_train = meta.int_or("context_length", 0)
    n_head = meta.per_layer("attention.head_count", n_layer, 0)
    n_head_kv = meta.per_layer("attention.head_count_kv", n_layer, -1)
    n_head_kv = [h if kv < 0 else kv for h, kv in zip(n_head, n_head_kv)]
    if any(not 0 <= h <= 65536 for h in n_head + n_head_kv):
        raise GGUFError(gguf.path, f"{arch}.attention.head_count(_kv) is out of range")
    n_ff = meta.per_layer("feed_forward_length", n_layer, 0)

    head0 = n_head[0] if n_head else 0
    if head0 > 0:
        head_k = meta.int_or("attention.key_length", n_embd // head0)
        head_v = meta.int_or("attention.value_length", n_embd // head0)
        rope_dims = meta.int_or("rope.dimension_count", head_k)
        if not (0 < head_k <= 1 << 16 and 0 <= head_v <= 1 << 16):
            raise GGUFError(gguf.path, f"attention head sizes {head_k}/{head_v} are out of range")
    else:
        head_k = head_v = rope_dims = 0
    head_k_swa = meta.int_or("attention.key_length_swa", head_k)
    head_v_swa = meta.int_or("attention.value_length_swa", head_v)

    layers = [
        LayerAnatomy(index=il, n_head=n_head[il], n_head_kv=n_head_kv[il], n_ff=n_ff[il]) for il in range(n_layer)
    ]

    input_tensors: list[TensorInfo] = []
    output_tensors: list[TensorInfo] = []
    other_tensors: list[TensorInfo] = []
    for info in gguf.tensors.values():
        match = _LAYER_RE.match(info.name)
        if match:
            il = int(match.group(1))
            if il >= n_layer:
                raise GGUFError(
                    gguf.path, f"tensor {info.name!r} belongs to layer {il}, but the model has {n_layer} layers"
                )
            layers[il].tensors.append(info)
        elif info.name.startswith(FIRST_LAYER_TENSORS) and layers:
            # LLM_TENSOR_LAYER_REPEATING, created for block 0: on the first layer's device, once
            layers[0].tensors.append(info)
        elif info.name.startswith(INPUT_TENSOR_PREFIXES):
            input_tensors.append(info)
        elif info.name.startswith(OUTPUT_TENSOR_PREFIXES):
            output_tensors.append(info)
        else:
            other_tensors.append(info)

    name = gguf.metadata.get("general.name")
    anatomy = ModelAnatomy(
        path=gguf.path,
        architecture=arch,
        name=name if isinstance(name, str) and name else gguf.path.rsplit("/", 1)[-1],
        file_bytes=gguf.file_bytes,
        n_params=sum(t.n_elements for t in gguf.tensors.values()),
        n_layer=n_layer,
        n_ctx_train=n_ctx_train,
        n_embd=n_embd,
        n_vocab=_checked_vocab(gguf, meta),
        layers=layers,
        input_tensors=input_tensors,
        output_tensors=output_tensors,
        other_tensors=other_tensors,
        tied_output="output.weight" not in gguf.tensors,
        rope_dims=rope_dims,
        metadata=gguf.metadata,
    )
    for layer in layers:
        layer.head_dim_k, layer.head_dim_v = head_k, head_v

    n_nextn = meta.int_or("nextn_predict_layers", 0)
    if 0 < n_nextn < n_layer:
        for layer in layers[n_layer - n_nextn :]:
            layer.is_mtp = True
            layer.has_kv = False
        anatomy.notes.append(f"{n_nextn} multi-token-prediction layer(s) are not loaded (their weights are skipped)")
    archs.apply_arch_rules(anatomy, meta)

    for layer in layers:
        if layer.is_swa:
            layer.head_dim_k, layer.head_dim_v = head_k_swa, head_v_swa
    return anatomy

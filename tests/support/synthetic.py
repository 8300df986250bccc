"""Headers of real-sized models, built in memory (no weights): for solver tests at realistic scale."""

from __future__ import annotations

from planner.anatomy import load_anatomy
from planner.ggml_types import ggml_type, tensor_bytes
from planner.gguf import GGUFFile, GGUFModel, SkippedArray, TensorInfo
from planner.model import ModelAnatomy


def llama_like(
    n_layer: int = 32,
    n_embd: int = 4096,
    n_head: int = 32,
    n_head_kv: int = 8,
    n_ff: int = 14336,
    n_vocab: int = 128256,
    n_ctx_train: int = 131072,
    weight: str = "q4_K",
    embd: str = "q6_K",
    arch: str = "llama",
    name: str = "Synthetic 8B",
    n_expert: int = 0,
    n_expert_used: int = 0,
    n_ff_exp: int = 0,
) -> ModelAnatomy:
    """A Llama-3-8B-shaped header (Q4_K_M-like types), 4.9 GB of weights it does not have."""
    head = n_embd // n_head
    shapes: list[tuple[str, tuple[int, ...], str]] = [("token_embd.weight", (n_embd, n_vocab), embd)]
    for il in range(n_layer):
        p = f"blk.{il}."
        shapes += [
            (p + "attn_norm.weight", (n_embd,), "f32"),
            (p + "attn_q.weight", (n_embd, n_head * head), weight),
            (p + "attn_k.weight", (n_embd, n_head_kv * head), weight),
            (p + "attn_v.weight", (n_embd, n_head_kv * head), embd),
            (p + "attn_output.weight", (n_head * head, n_embd), weight),
            (p + "ffn_norm.weight", (n_embd,), "f32"),
        ]
        if n_expert:
            shapes += [
                (p + "ffn_gate_inp.weight", (n_embd, n_expert), "f32"),
                (p + "ffn_gate_exps.weight", (n_embd, n_ff_exp, n_expert), weight),
                (p + "ffn_up_exps.weight", (n_embd, n_ff_exp, n_expert), weight),
                (p + "ffn_down_exps.weight", (n_ff_exp, n_embd, n_expert), embd),
            ]
        else:
            shapes += [
                (p + "ffn_gate.weight", (n_embd, n_ff), weight),
                (p + "ffn_up.weight", (n_embd, n_ff), weight),
                (p + "ffn_down.weight", (n_ff, n_embd), embd),
            ]
    shapes += [("output_norm.weight", (n_embd,), "f32"), ("output.weight", (n_embd, n_vocab), embd)]
    offset = 4096
    tensors = {}
    for tname, shape, tname_type in shapes:
        t = ggml_type(tname_type)
        size = tensor_bytes(t, shape)
        tensors[tname] = TensorInfo(tname, shape, t, offset, size)
        offset += size + (-size % 32)
    metadata = {
        "general.architecture": arch,
        "general.name": name,
        "general.file_type": 15,
        f"{arch}.block_count": n_layer,
        f"{arch}.context_length": n_ctx_train,
        f"{arch}.embedding_length": n_embd,
        f"{arch}.feed_forward_length": n_ff,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv,
        "tokenizer.ggml.tokens": SkippedArray("string", n_vocab),
    }
    if n_expert:
        metadata.update(
            {
                f"{arch}.expert_count": n_expert,
                f"{arch}.expert_used_count": n_expert_used,
                f"{arch}.expert_feed_forward_length": n_ff_exp,
            }
        )
    gfile = GGUFFile(f"/synthetic/{name}.gguf", 3, offset, 32, 4096, metadata, list(tensors.values()))
    return load_anatomy(GGUFModel(gfile.path, [gfile], metadata, tensors))

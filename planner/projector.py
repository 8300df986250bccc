"""Vision (and audio) projectors: the mmproj GGUF that libmtmd loads beside the language model.

llama.cpp's own fitting ignores the projector; a multimodal chat loads it on
the first GPU (libmtmd's default) or on the host. Its weights are read exactly
from the header. Its compute buffer depends on the projector's graph for the
largest image it accepts; vramchat estimates it from the encoder's shape and
says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from planner.errors import GGUFError
from planner.gguf import GGUFModel, TensorInfo, read_gguf


@dataclass(frozen=True)
class Projector:
    path: str
    projector_type: str
    tensors: list[TensorInfo]
    image_size: int
    patch_size: int
    n_embd: int
    n_ff: int
    n_head: int
    n_layer: int
    has_vision: bool
    has_audio: bool

    @property
    def weight_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    @property
    def n_patches(self) -> int:
        if not self.patch_size:
            return 0
        side = self.image_size // self.patch_size
        return side * side

    def compute_estimate(self, flash_attn: bool) -> int:
        """Peak activations of one encoder pass over the largest image (an estimate).

        The residual stream, the MLP intermediate and, without flash attention, the
        attention matrix [n_patches, n_patches, n_head] in F32 dominate a ViT's graph.
        """
        n = self.n_patches
        if n == 0:
            return 64 * 1024 * 1024  # audio encoders and unknown shapes: a flat allowance
        hidden = n * self.n_embd * 4
        mlp = n * max(self.n_ff, self.n_embd) * 4
        attn = 0 if flash_attn else n * n * max(self.n_head, 1) * 4
        return 3 * hidden + max(2 * mlp, attn + hidden)


def read_projector(path: str | os.PathLike[str]) -> Projector:
    gguf: GGUFModel = read_gguf(path)
    md = gguf.metadata
    arch = gguf.architecture
    if arch != "clip":
        raise GGUFError(gguf.path, f"not a multimodal projector (architecture {arch!r}, expected 'clip')")

    def num(key: str) -> int:
        value = md.get(key, 0)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    ptype = md.get("clip.projector_type") or md.get("clip.vision.projector_type") or "unknown"
    return Projector(
        path=gguf.path,
        projector_type=str(ptype),
        tensors=list(gguf.tensors.values()),
        image_size=num("clip.vision.image_size"),
        patch_size=num("clip.vision.patch_size"),
        n_embd=num("clip.vision.embedding_length"),
        n_ff=num("clip.vision.feed_forward_length"),
        n_head=num("clip.vision.attention.head_count"),
        n_layer=num("clip.vision.block_count"),
        has_vision=bool(md.get("clip.has_vision_encoder", True)),
        has_audio=bool(md.get("clip.has_audio_encoder", False)),
    )

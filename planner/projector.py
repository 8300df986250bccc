"""Vision (and audio) projectors: the mmproj GGUF that libmtmd loads beside the language model.

llama.cpp's own fitting ignores the projector; a multimodal chat loads it on
the first GPU (libmtmd's default) or on the host. Its weights are read exactly
from the header. Its compute buffer is what clip.cpp's warmup reserves: the
encoder's graph for the warmup image, replayed through ggml's allocator, for the
projector types with a rule in `planner.projectors`; for the others vramchat
estimates it from the encoder's shape and says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from planner.errors import GGUFError
from planner.gguf import GGUFModel, TensorInfo, read_gguf


@dataclass(frozen=True)
class Projector:
    """A multimodal projector (--mmproj) file: its encoder's shape and tensors (plain data: what it
    costs is priced in planner.projectors.compute)."""

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
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # the most tokens an image may take (llama-server's --image-max-tokens); None: the model's own limit
    image_max_tokens: int | None = None

    @property
    def n_patches(self) -> int:
        if not self.patch_size:
            return 0
        side = self.image_size // self.patch_size
        return side * side


def read_projector(path: str | os.PathLike[str], image_max_tokens: int | None = None) -> Projector:
    """The projector file's header; `image_max_tokens` caps the largest image planned for, as
    llama-server's --image-max-tokens does."""
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
        metadata=dict(md),
        image_max_tokens=image_max_tokens,
    )

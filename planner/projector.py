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
from typing import TYPE_CHECKING, Any

from planner.errors import GGUFError
from planner.gguf import GGUFModel, TensorInfo, read_gguf

if TYPE_CHECKING:
    from planner.backends import BackendRules

# an audio encoder's compute buffer is not modelled: a flat allowance, named as an estimate
AUDIO_COMPUTE_ALLOWANCE = 64 * 1024 * 1024


@dataclass(frozen=True)
class Projector:
    """A multimodal projector (--mmproj) file: its encoder's shape and tensors."""

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
    def vision_rule(self) -> bool:
        """Whether the planner builds this projector's vision graph (planner.projectors)."""
        from planner.projectors import rule_for

        return self.has_vision and rule_for(self.projector_type) is not None

    @property
    def exact(self) -> bool:
        """Whether the whole compute is exact: a vision graph the planner builds, and no audio encoder
        (libmtmd loads one beside it, with its own buffers, whose graph is not modelled)."""
        return self.vision_rule and not self.has_audio

    @property
    def loaded_tensors(self) -> list[TensorInfo]:
        """The tensors clip.cpp loads into its weight buffer (it reads some scalars and leaves them out)."""
        from planner.projectors import rule_for

        rule = rule_for(self.projector_type)
        skip = rule.unloaded if rule is not None else None
        return [t for t in self.tensors if not (skip and skip(t.name))]

    @property
    def weight_bytes(self) -> int:
        return sum(t.n_bytes for t in self.loaded_tensors)

    def compute(self, flash_attn: bool, gpu: tuple[str, str, BackendRules] | None = None) -> int:
        """The compute buffer on the projector's device once it has encoded its largest image (clip's
        warmup reserves less for the encoders of dynamic resolution): exact when `exact`, else
        `compute_estimate`. `gpu` is (name, backend kind, BackendRules) of the GPU holding the projector,
        None on the host."""
        if not self.vision_rule:
            return self.compute_estimate(flash_attn)
        audio = AUDIO_COMPUTE_ALLOWANCE if self.has_audio else 0
        from planner.projectors.compute import peak_compute

        # the solver plans many configurations with one projector: replay each of its graphs once
        key = (self._identity(), self.image_max_tokens, flash_attn, gpu[:2] if gpu else None, gpu[2] if gpu else None)
        cached = _COMPUTE_CACHE.get(key)
        if cached is None:
            sizes = peak_compute(self, flash_attn, gpu=gpu, image_max_tokens=self.image_max_tokens)
            cached = sizes[gpu[0]] if gpu else sizes["CPU"]
            if len(_COMPUTE_CACHE) > 256:
                _COMPUTE_CACHE.clear()
            _COMPUTE_CACHE[key] = cached
        return cached + audio

    def _identity(self) -> tuple[object, ...]:
        """What the compute buffer depends on: the file, its shapes and the metadata clip.cpp reads."""
        md = tuple(sorted((k, repr(v)) for k, v in self.metadata.items() if not k.startswith("general.")))
        return (self.path, self.projector_type, len(self.tensors), sum(t.n_bytes for t in self.tensors), md)

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
            return AUDIO_COMPUTE_ALLOWANCE  # audio encoders and unknown shapes: a flat allowance
        hidden = n * self.n_embd * 4
        mlp = n * max(self.n_ff, self.n_embd) * 4
        attn = 0 if flash_attn else n * n * max(self.n_head, 1) * 4
        return 3 * hidden + max(2 * mlp, attn + hidden)


_COMPUTE_CACHE: dict[tuple[object, ...], int] = {}


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

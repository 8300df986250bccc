"""Whether a projector fits its language model: the width of what it writes against the model's input.

libmtmd refuses a projector whose embeddings are not as wide as the text model's input
(`mtmd_context`: "mismatch between text model (n_embd = ...) and mmproj"), after both are
loaded. The width is `clip_n_mmproj_embd` of the pinned clip.cpp, read here from the header
for the projector types the planner knows, so that a wrong pair is named before a load.
"""

from __future__ import annotations

from planner.gguf import TensorInfo
from planner.model import ModelAnatomy
from planner.projector import Projector


def _dim(tensors: dict[str, TensorInfo], name: str, axis: int) -> int | None:
    t = tensors.get(name)
    if t is None or len(t.shape) <= axis:
        return None
    return int(t.shape[axis])


def output_width(p: Projector) -> int | None:
    """The width of the embeddings the projector writes (clip_n_mmproj_embd); None for a type whose
    rule is not known here (libmtmd checks it when it loads)."""
    tensors = {t.name: t for t in p.tensors}
    kind = p.projector_type
    if kind == "gemma3":
        return _dim(tensors, "mm.input_projection.weight", 0)
    if kind == "gemma4v":
        return _dim(tensors, "mm.input_projection.weight", 1)
    if kind == "pixtral":
        return _dim(tensors, "mm.2.weight", 1)
    if kind == "qwen3vl_merger":
        main = _dim(tensors, "mm.2.bias", 0)
        deepstack = {name.split(".")[2] for name in tensors if name.startswith("v.deepstack.")}
        return None if main is None else main * (1 + len(deepstack))
    return None


def input_width(model: ModelAnatomy) -> int:
    """The width of the text model's input embeddings (llama_model_n_embd_inp)."""
    return model.n_embd_inp or model.n_embd


def mismatch(p: Projector, model: ModelAnatomy) -> str | None:
    """Why the projector cannot go with this model, in a user's words; None when it can (or when only
    libmtmd can tell)."""
    width = output_width(p)
    wanted = input_width(model)
    if width is None or width == wanted:
        return None
    name = p.path.rsplit("/", 1)[-1]
    return (
        f"{name} writes image embeddings {width} wide, but {model.name or model.architecture} reads "
        f"{wanted}: it is the projector of another model"
    )


# Gemma 4's small models (E2B, E4B: these text widths) read images causally, the larger ones both ways
_GEMMA4V_CAUSAL_WIDTHS = (1536, 2560)


def image_tokens_in_one_batch(p: Projector, model: ModelAnatomy) -> int:
    """The most tokens one image takes when the model attends over an image's tokens both ways
    (`mtmd_decode_use_non_causal`: Gemma 3, the larger Gemma 4): llama.cpp must read such an image in one
    micro-batch, so n_ubatch must be at least this. 0 when images are read causally."""
    if not p.has_vision:
        return 0
    if p.projector_type == "gemma3":
        from planner.projectors.gemma3 import n_merge

        side = (p.image_size // p.patch_size) // max(n_merge(p), 1) if p.patch_size else 0
        return side * side
    if p.projector_type == "gemma4v" and input_width(model) not in _GEMMA4V_CAUSAL_WIDTHS:
        from planner.projectors.gemma4v import MAX_TOKENS

        return p.image_max_tokens or MAX_TOKENS
    return 0

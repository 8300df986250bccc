"""Which vision projector goes with a model: the one named, or the one found beside it.

Model folders hold projectors as `mmproj*.gguf` beside the model (app.discovery pairs them); Ollama's
manifests name a model's projector blob (app.ollama).
A folder may hold several models and projectors: the one whose embeddings are as wide as the
model's input is chosen (`planner.projectors.match`), else the first that can be read.
"""

from __future__ import annotations

import os

from app.errors import VramchatError
from planner.errors import PlannerError
from planner.model import ModelAnatomy
from planner.projector import Projector, read_projector


class VisionError(VramchatError, ValueError):
    """No projector for the model, or one that does not go with it; the message says which and why."""

    title = "Images"


def projectors_beside(model_path: str) -> list[str]:
    """The projector files (`mmproj*.gguf`) in the model's folder, by name; for a blob of Ollama's,
    the projectors its manifests name beside it."""
    from app.discovery import is_projector
    from app.ollama import projectors_of_blob

    named = projectors_of_blob(model_path)
    if named is not None:
        return named
    folder = os.path.dirname(os.path.abspath(model_path)) or "."
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [
        os.path.join(folder, n)
        for n in names
        if n.lower().endswith(".gguf") and is_projector(n) and os.path.isfile(os.path.join(folder, n))
    ]


def choose_projector(
    candidates: list[str], model: ModelAnatomy, image_max_tokens: int | None = None
) -> Projector | None:
    """The candidate that fits `model` (its width first), read; None when there is none."""
    from planner.projectors.match import mismatch

    readable = []
    for path in candidates:
        try:
            readable.append(read_projector(path, image_max_tokens))
        except (PlannerError, OSError):
            continue
    for p in readable:
        if mismatch(p, model) is None:
            return p
    return readable[0] if readable else None


def projector_for(
    model_path: str,
    model: ModelAnatomy,
    given: str | None = None,
    image_max_tokens: int | None = None,
    sees: bool = True,
    hears: bool = False,
) -> Projector:
    """The projector to load with the model: `given` (--mmproj), else one found beside the model.
    VisionError when there is none, when it belongs to another model, or when it cannot take what
    is to be sent (`sees`: images, `hears`: sounds)."""
    from planner.projectors.match import mismatch

    name = model.name or os.path.basename(model_path)
    if given:
        try:
            p = read_projector(given, image_max_tokens)
        except FileNotFoundError:
            raise VisionError(f"{given}: no such file") from None
        except (PlannerError, OSError) as exc:
            raise VisionError(f"{given}: {getattr(exc, 'problem', None) or exc}") from None
    else:
        found = choose_projector(projectors_beside(model_path), model, image_max_tokens)
        if found is None:
            raise VisionError(
                f"{name} has no vision projector beside it (an mmproj*.gguf file in "
                f"{os.path.dirname(os.path.abspath(model_path))}): it cannot see images. Give one with --mmproj FILE."
            )
        p = found
    wrong = mismatch(p, model)
    if wrong:
        raise VisionError(wrong)
    if sees and not p.has_vision:
        raise VisionError(f"{os.path.basename(p.path)} has no vision encoder (it is for sound): it cannot see images")
    if hears and not p.has_audio:
        raise VisionError(f"{os.path.basename(p.path)} has no audio encoder: {name} cannot hear sounds")
    return p

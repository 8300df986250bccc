"""Finding GGUF models on disk: the folders to look in, and grouping what is found.

A split model (`name-00001-of-00003.gguf`) is one entry, named by its first shard,
with the size of all its shards; vision projectors (`mmproj*.gguf`) are attached to
the models in their folder instead of being listed. Hugging Face's hub cache links
snapshot files to blobs: files are deduplicated by their real path. Ollama's store names its blobs
in manifests (app/ollama.py): each name it has pulled is listed as Ollama lists it (`gemma3:270m`),
once a name even where names share a blob, with the projector its manifest names.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from app.ollama import OLLAMA, is_store, pulled_models
from app.ollama import stores as ollama_stores
from app.paths import models_dir
from planner.units import SPLIT_NAME

MAX_DEPTH = 8
_SPLIT = SPLIT_NAME


@dataclass(frozen=True)
class Folder:
    path: Path
    source: str  # vramchat, --models-dir, settings, LM Studio, llama.cpp, Hugging Face, Ollama


@dataclass
class ModelFile:
    """One model as the picker lists it."""

    path: str  # the file to load (the first shard of a split model)
    source: str
    size: int  # bytes on disk, every shard counted
    mtime_ns: int  # the newest shard's
    shards: list[str] = field(default_factory=list)
    missing_shards: list[str] = field(default_factory=list)
    projectors: list[str] = field(default_factory=list)  # vision projectors found beside it
    is_demo: bool = False
    ollama_name: str = ""  # Ollama's name for it (`gemma3:270m`): Ollama's blob, never changed here
    ollama_manifest: str = ""  # the manifest that gives that name

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)

    @property
    def entry_id(self) -> str:
        """What tells this entry from every other in a list: the path, or for one of Ollama's names the
        manifest that gives it (one blob can have several names, each its own row)."""
        return self.ollama_manifest or self.path

    @property
    def problem(self) -> str:
        if self.missing_shards:
            return f"split model: {len(self.missing_shards)} of {len(self.shards)} shards missing"
        return ""


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _xdg_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or _home() / ".cache")


def known_cache_folders() -> list[Folder]:
    """LM Studio's models folders, llama.cpp's download cache, the Hugging Face hub cache and Ollama's
    models folders, where they exist on this machine."""
    home = _home()
    out = [
        Folder(home / ".lmstudio" / "models", "LM Studio"),
        Folder(_xdg_cache() / "lm-studio" / "models", "LM Studio"),
    ]
    if os.environ.get("LLAMA_CACHE"):
        out.append(Folder(Path(os.environ["LLAMA_CACHE"]), "llama.cpp"))
    elif sys.platform == "darwin":
        out.append(Folder(home / "Library" / "Caches" / "llama.cpp", "llama.cpp"))
    elif sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        out.append(Folder(Path(os.environ["LOCALAPPDATA"]) / "llama.cpp", "llama.cpp"))
    else:
        out.append(Folder(_xdg_cache() / "llama.cpp", "llama.cpp"))
    if os.environ.get("HF_HUB_CACHE"):
        out.append(Folder(Path(os.environ["HF_HUB_CACHE"]), "Hugging Face"))
    elif os.environ.get("HF_HOME"):
        out.append(Folder(Path(os.environ["HF_HOME"]) / "hub", "Hugging Face"))
    else:
        out.append(Folder(_xdg_cache() / "huggingface" / "hub", "Hugging Face"))
    out += [Folder(store, OLLAMA) for store in ollama_stores()]
    return [f for f in out if f.path.is_dir()]


def folders_to_scan(
    extra: Iterable[str | Path] = (), settings_dirs: Iterable[str | Path] = (), known_caches: bool = True
) -> list[Folder]:
    """Every folder to look in, in order, each once."""
    candidates = [Folder(models_dir(), "vramchat")]
    candidates += [Folder(Path(p).expanduser(), "--models-dir") for p in extra]
    candidates += [Folder(Path(p).expanduser(), "settings") for p in settings_dirs]
    if known_caches:
        candidates += known_cache_folders()
    seen: set[str] = set()
    out = []
    for folder in candidates:
        key = os.path.realpath(folder.path)
        if key not in seen:
            seen.add(key)
            out.append(folder)
    return out


def _is_regular_file(path: str) -> bool:
    """A regular file, or a link to one: a FIFO, socket or device named `*.gguf` is never opened
    (reading a FIFO waits for a writer forever). `os.stat` follows the link and opens nothing."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:  # a broken link, or gone since the folder was listed
        return False


def _gguf_files(root: Path) -> Iterable[str]:
    """GGUF files under root: symlinked files are followed, symlinked folders are not (no loops),
    hidden folders and Hugging Face's blob store are skipped, and so is anything not a regular file."""
    root_depth = str(root).rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=lambda _e: None):
        if dirpath.count(os.sep) - root_depth >= MAX_DEPTH:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "blobs")
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if name.lower().endswith(".gguf") and not name.startswith(".") and _is_regular_file(path):
                yield path


def is_projector(name: str) -> bool:
    return "mmproj" in name.lower()


def scan(
    folders: list[Folder], demo_path: Path | None = None, progress: Callable[[str], None] | None = None
) -> list[ModelFile]:
    """The models in `folders`, grouped; `demo_path` is marked as the demo model."""
    found: dict[str, tuple[str, str]] = {}  # real path -> (path as found, source)
    named: dict[str, ModelFile] = {}  # Ollama's names, by their manifest's real path
    for folder in folders:
        if progress:
            progress(str(folder.path))
        if not folder.path.is_dir():
            continue
        if is_store(folder.path):  # Ollama's: its manifests name the models (blobs hold no file names)
            for file in _ollama_models(folder.path):
                named.setdefault(os.path.realpath(file.ollama_manifest), file)
            continue
        for path in _gguf_files(folder.path):
            real = os.path.realpath(path)
            found.setdefault(real, (path, folder.source))
    demo_real = os.path.realpath(demo_path) if demo_path else None
    if demo_real is not None and demo_real not in found and os.path.isfile(demo_real):
        found[demo_real] = (str(demo_path), "demo")  # assembled outside the folders scanned

    projectors: dict[str, list[str]] = {}
    splits: dict[tuple[str, str, int], dict[int, str]] = {}
    singles: list[tuple[str, str]] = []
    sources: dict[str, str] = {}
    for _real, (path, source) in sorted(found.items(), key=lambda kv: kv[1][0]):
        directory, name = os.path.split(path)
        sources[path] = source
        if is_projector(name):
            projectors.setdefault(directory, []).append(path)
            continue
        match = _SPLIT.match(name)
        if match and int(match["count"]) > 1:
            key = (directory, match["stem"], int(match["count"]))
            splits.setdefault(key, {})[int(match["idx"])] = path
        else:
            singles.append((path, source))

    models: list[ModelFile] = []
    for path, source in singles:
        st = _stat(path)
        if st is None:
            continue
        models.append(
            ModelFile(
                path,
                source,
                st[0],
                st[1],
                [path],
                is_demo=demo_real is not None and os.path.realpath(path) == demo_real,
            )
        )
    for (directory, stem, count), shards in splits.items():
        all_paths = [os.path.join(directory, f"{stem}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
        present = {i: p for i, p in shards.items() if 1 <= i <= count}
        missing = [p for i, p in enumerate(all_paths, start=1) if i not in present]
        stats = [s for s in (_stat(p) for p in present.values()) if s is not None]
        source = sources[next(iter(present.values()))]
        models.append(
            ModelFile(
                all_paths[0],
                source,
                sum(s[0] for s in stats),
                max((s[1] for s in stats), default=0),
                all_paths,
                missing,
            )
        )
    for model in models:
        model.projectors = projectors.get(os.path.dirname(model.path), [])
    models += named.values()
    models.sort(key=lambda m: (not m.is_demo, (m.ollama_name or m.file_name).lower(), m.entry_id))
    return models


def _ollama_models(store: Path) -> list[ModelFile]:
    """The models Ollama's store at `store` names, one entry a name (app/ollama.py reads them)."""
    out = []
    for pulled in pulled_models(store):
        st = _stat(pulled.model)
        if st is not None:
            out.append(
                ModelFile(
                    pulled.model,
                    OLLAMA,
                    st[0],
                    st[1],
                    [pulled.model],
                    projectors=list(pulled.projectors),
                    ollama_name=pulled.display_name,
                    ollama_manifest=pulled.manifest,
                )
            )
    return out


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns

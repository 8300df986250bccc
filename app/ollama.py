"""The models Ollama has pulled, read from its store on disk and never changed.

Ollama keeps every file of a model as a blob named by its SHA-256 (`blobs/sha256-<hex>`) and names them
in manifests, one small JSON file a name (`manifests/<registry>/<namespace>/<model>/<tag>`) whose
`layers` list each blob's media type and digest: `application/vnd.ollama.image.model` is the GGUF,
`application/vnd.ollama.image.projector` its vision projector (the template, parameters and license are
other layers, not read here). `registry.ollama.ai/library/gemma3/270m` is what `ollama run gemma3:270m`
pulled; one blob often has several names (`gemma3:latest` and `gemma3:4b`), and each is listed.

The store is text from outside: a manifest is read only up to MAX_MANIFEST_BYTES, one that is not the
JSON described is passed over, a digest that is not `sha256:<64 hex>` refuses its manifest, a blob that
resolves outside the store's `blobs` folder (a link) or is not a regular file is refused, and the name's
parts must be what Ollama's own names are made of. Nothing here writes, moves or deletes a file: the
blobs are Ollama's (`ollama rm NAME` removes a name, and its blobs once no name uses them).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from app.terminal_text import terminal_safe

OLLAMA = "Ollama"  # the source a model list shows
DEFAULT_REGISTRY = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
MODEL_LAYER = "application/vnd.ollama.image.model"
PROJECTOR_LAYER = "application/vnd.ollama.image.projector"
MAX_MANIFEST_BYTES = 256 * 1024  # a real manifest is about 1 KB; one of a model imported as tensors, tens of KB
MAX_MANIFESTS = 10_000  # names read from one store at most
# where Ollama's Linux installer runs its service, as its own `ollama` user (home /usr/share/ollama)
SYSTEM_STORE = Path("/usr/share/ollama/.ollama/models")

_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
_BLOB_NAME = re.compile(r"sha256-[0-9a-f]{64}")
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")  # a namespace, a model, a tag
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}(?::[0-9]{1,5})?")  # a registry, with its port


@dataclass(frozen=True)
class OllamaName:
    """A model's full name in Ollama: registry host, namespace, model and tag."""

    host: str
    namespace: str
    model: str
    tag: str

    def __str__(self) -> str:
        """As `ollama list` shows it: `gemma3:270m`, `someone/model:tag`, `hf.co/org/repo:Q4_K_M`."""
        if self.host.lower() != DEFAULT_REGISTRY:
            return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"
        if self.namespace.lower() != DEFAULT_NAMESPACE:
            return f"{self.namespace}/{self.model}:{self.tag}"
        return f"{self.model}:{self.tag}"

    def same(self, other: OllamaName) -> bool:
        """Ollama's names are the same name in any case (`Gemma3:270M` is `gemma3:270m`)."""
        return _folded(self) == _folded(other)

    @classmethod
    def parse(cls, text: str) -> OllamaName | None:
        """The name `text` gives, Ollama's defaults filled in (`gemma3` is
        registry.ollama.ai/library/gemma3:latest); None where it is no Ollama name."""
        if not text or len(text) > 512:
            return None
        parts = text.split("/")
        if len(parts) > 3:
            return None
        host = parts[0] if len(parts) == 3 else DEFAULT_REGISTRY
        namespace = parts[-2] if len(parts) >= 2 else DEFAULT_NAMESPACE
        model, colon, tag = parts[-1].partition(":")
        return cls.from_parts(host, namespace, model, tag if colon else DEFAULT_TAG)

    @classmethod
    def from_parts(cls, host: str, namespace: str, model: str, tag: str) -> OllamaName | None:
        if not _HOST.fullmatch(host) or not all(_PART.fullmatch(p) for p in (namespace, model, tag)):
            return None
        return cls(host, namespace, model, tag)


def _folded(name: OllamaName) -> tuple[str, str, str, str]:
    return (name.host.lower(), name.namespace.lower(), name.model.lower(), name.tag.lower())


@dataclass(frozen=True)
class PulledModel:
    """One name in Ollama's store: the GGUF blob it names, and its projectors."""

    name: OllamaName
    model: str  # the GGUF blob's path
    projectors: tuple[str, ...]  # the projector blobs its manifest names (a vision model's mmproj)
    manifest: str  # the manifest file's path: one per name, where a blob may have several names

    @property
    def display_name(self) -> str:
        """The name to show (its parts are checked already: this is a guard, not a change)."""
        return terminal_safe(str(self.name))


def stores() -> list[Path]:
    """Ollama's model folders on this machine: OLLAMA_MODELS where it is set (Ollama reads only that
    one), else ~/.ollama/models (Linux, macOS and Windows alike); on Linux also the system service's
    folder, where it can be read."""
    env = os.environ.get("OLLAMA_MODELS")
    if env:
        candidates = [Path(env).expanduser()]
    else:
        home = os.environ.get("HOME") or str(Path.home())
        candidates = [Path(home) / ".ollama" / "models"]
    if sys.platform.startswith("linux"):
        candidates.append(SYSTEM_STORE)
    out, seen = [], set()
    for path in candidates:
        real = os.path.realpath(path)
        if real not in seen and is_store(path):
            seen.add(real)
            out.append(path)
    return out


def is_store(path: Path) -> bool:
    """Whether `path` is an Ollama models folder (a `manifests` and a `blobs` folder, readable)."""
    try:
        return (path / "manifests").is_dir() and (path / "blobs").is_dir() and os.access(path / "manifests", os.X_OK)
    except OSError:
        return False


def pulled_models(store: Path) -> list[PulledModel]:
    """Every name in the store whose manifest names a GGUF blob that is there, by name."""
    blobs = store / "blobs"
    out = []
    for name, manifest in _manifests(store / "manifests"):
        layers = _layers(manifest)
        if layers is None:
            continue
        models = [d for m, d in layers if m == MODEL_LAYER]
        if not models:  # a model imported as tensors (safetensors), or an adapter's: nothing llama.cpp loads
            continue
        try:
            model = _blob(blobs, models[0])
            projectors = [_blob(blobs, d) for m, d in layers if m == PROJECTOR_LAYER]
        except _Refused:
            continue
        if model is not None:  # else a pull cut short
            out.append(PulledModel(name, model, tuple(p for p in projectors if p is not None), manifest))
    out.sort(key=lambda m: str(m.name).lower())
    return out


def find_model(text: str, where: list[Path] | None = None) -> PulledModel | None:
    """The model Ollama has pulled under the name `text` (`gemma3:270m`, `gemma3` for its latest),
    looked for in `where` (default: `stores()`); None when no store has it."""
    wanted = OllamaName.parse(text)
    if wanted is None:
        return None
    for store in stores() if where is None else where:
        for model in pulled_models(store):
            if model.name.same(wanted):
                return model
    return None


def projectors_of_blob(path: str) -> list[str] | None:
    """The projectors Ollama's manifests name beside the model blob at `path` (every name of that blob);
    None when `path` is not a blob in an Ollama store."""
    folder, base = os.path.split(os.path.abspath(path))
    if not _BLOB_NAME.fullmatch(base) or os.path.basename(folder) != "blobs":
        return None
    store = Path(os.path.dirname(folder))
    if not is_store(store):
        return None
    real = os.path.realpath(path)
    found: list[str] = []
    for model in pulled_models(store):
        if os.path.realpath(model.model) == real:
            found += [p for p in model.projectors if p not in found]
    return found


def _manifests(root: Path) -> list[tuple[OllamaName, str]]:
    """(name, manifest path) for every `<host>/<namespace>/<model>/<tag>` file under `root`: folders
    that are links are not followed, names Ollama would not make are passed over."""
    out: list[tuple[OllamaName, str]] = []
    for host in _entries(root, folders=True):
        for namespace in _entries(host, folders=True):
            for model in _entries(namespace, folders=True):
                for tag in _entries(model, folders=False):
                    name = OllamaName.from_parts(host.name, namespace.name, model.name, tag.name)
                    if name is not None:
                        out.append((name, tag.path))
                    if len(out) >= MAX_MANIFESTS:
                        return out
    return out


def _entries(folder: Path | os.DirEntry[str], folders: bool) -> list[os.DirEntry[str]]:
    """The sub-folders (or the regular files) of `folder`, links excluded, by name."""
    try:
        with os.scandir(folder) as it:
            entries = [
                e
                for e in it
                if (e.is_dir(follow_symlinks=False) if folders else e.is_file(follow_symlinks=False))
                and not e.name.startswith(".")
            ]
    except OSError:
        return []
    return sorted(entries, key=lambda e: e.name)


def _layers(path: str) -> list[tuple[str, str]] | None:
    """(media type, digest) of each layer the manifest at `path` lists; None when it is not a manifest
    (too large, not JSON, not the shape Ollama writes)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_MANIFEST_BYTES:
        return None
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past Python's limit
        return None
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    if not isinstance(layers, list):
        return None
    out = []
    for layer in layers:
        if not isinstance(layer, dict):
            return None
        media, digest = layer.get("mediaType"), layer.get("digest")
        if not isinstance(media, str) or not isinstance(digest, str):
            return None
        out.append((media.split(";")[0].strip(), digest))
    return out


class _Refused(Exception):
    """A layer whose digest or blob is not Ollama's making: its manifest is passed over."""


def _blob(blobs: Path, digest: str) -> str | None:
    """The path of the blob `digest` names, None when it is not there; _Refused for a digest that is not
    sha256:<64 hex>, a blob that leads out of `blobs` (a link), or one that is not a regular file."""
    match = _DIGEST.fullmatch(digest)
    if match is None:
        raise _Refused(digest)
    path = os.path.join(blobs, f"sha256-{match[1]}")
    try:
        st = os.stat(path)
    except OSError:
        if os.path.islink(path):  # a broken link
            raise _Refused(path) from None
        return None
    if not stat.S_ISREG(st.st_mode) or os.path.dirname(os.path.realpath(path)) != os.path.realpath(blobs):
        raise _Refused(path)
    return path

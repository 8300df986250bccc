"""A folder laid out as Ollama's models folder is after `ollama pull`: each file a blob named by its
SHA-256 (`blobs/sha256-<hex>`), each name a manifest (`manifests/<registry>/<namespace>/<model>/<tag>`)
whose layers give the blobs' media types and digests, the way Ollama writes them."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

MODEL = "application/vnd.ollama.image.model"
PROJECTOR = "application/vnd.ollama.image.projector"
TEMPLATE = "application/vnd.ollama.image.template"
PARAMS = "application/vnd.ollama.image.params"


def put_blob(store: Path, data: bytes | Path) -> dict[str, object]:
    """Store `data` (bytes, or a file's) as a blob; its layer's digest and size."""
    blobs = store / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    if isinstance(data, Path):
        digest = hashlib.sha256(data.read_bytes()).hexdigest()
        target = blobs / f"sha256-{digest}"
        if not target.exists():
            shutil.copyfile(data, target)
        size = data.stat().st_size
    else:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / f"sha256-{digest}").write_bytes(data)
        size = len(data)
    return {"digest": f"sha256:{digest}", "size": size}


def manifest_path(store: Path, name: str) -> Path:
    """Where the manifest of `name` ([host/][namespace/]model:tag) lives."""
    parts = name.split("/")
    host = parts[0] if len(parts) == 3 else "registry.ollama.ai"
    namespace = parts[-2] if len(parts) >= 2 else "library"
    model, _, tag = parts[-1].partition(":")
    return store / "manifests" / host / namespace / model / (tag or "latest")


def pull(store: Path, name: str, model: Path, projector: Path | None = None) -> Path:
    """Put `model` (and its `projector`) in `store` under `name` as `ollama pull` leaves them, with a template
    and parameters beside them; the manifest's path."""
    layers = [{"mediaType": MODEL, **put_blob(store, model)}]
    if projector is not None:
        layers.append({"mediaType": PROJECTOR, **put_blob(store, projector)})
    layers.append({"mediaType": TEMPLATE, **put_blob(store, b"{{ .Prompt }}")})
    layers.append({"mediaType": PARAMS, **put_blob(store, json.dumps({"stop": ["<end>"]}).encode())})
    config = put_blob(store, json.dumps({"model_format": "gguf", "model_family": "llama"}).encode())
    return write_manifest(
        store,
        name,
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", **config},
            "layers": layers,
        },
    )


def write_manifest(store: Path, name: str, manifest: object | bytes) -> Path:
    """A manifest of any content (a JSON value, or raw bytes) under `name`."""
    path = manifest_path(store, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode())
    (store / "blobs").mkdir(parents=True, exist_ok=True)
    return path

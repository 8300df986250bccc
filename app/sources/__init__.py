"""Where models come from: this machine, an URL, or the Hugging Face hub, behind one `ModelSource`.

    resolve_source(text)   -> ModelSource   a path, an URL, hf:ORG/REPO:QUANT, ORG/REPO/FILE.gguf
    load_anatomy(source)   -> ModelAnatomy  from the header, read by ranges and cached (app/sources/headers.py)
    list_repo / repo_models / search_repos / popular_chat_repos   (app/sources/hub.py)
    download(source, ...)                   (app/sources/download.py)

Nothing here is imported by a plan of a local file; huggingface_hub and httpx2 are imported when a
remote model is asked for.

For the picker's hub view (every call blocks on the network: run it in a worker thread, post the
result to the UI; every failure is a `SourceError` with a one-line message and a title):

    set_note_sink(fn)                            notes (planned offline ...) to fn, not stderr: set it first
    hub.popular_chat_repos(limit) / hub.search_repos(query, limit) -> list[RepoSummary]
    hub.list_repo(repo_id) -> RepoListing        (offline: the listing seen last, `from_cache` says why)
    hub.repo_models(listing) -> list[ModelSource]
    quants.plan_quants(models, load_anatomy, plan, progress) -> QuantTable
        plan(source, anatomy) -> FitResult, e.g. choices.plan_for(anatomy, gpus, host, PlanChoice());
        headers read in parallel threads, each model planned in the calling thread as its header
        arrives; rows[i].summary is what catalog.fit_badge draws; table.best / table.why;
        progress(done, total) is called in the calling thread
    download.plan_download(source) -> Download   (needed, free, paths: show before starting)
    download.download(source, progress=fn, cancel=threading.Event()) -> DownloadResult
        progress(Progress) from the downloading thread, at most 10 times a second (done, total, speed,
        seconds_left); cancel.set() stops it between two chunks (Cancelled; the hidden partial is kept
        to resume); download.discard_partial(source) drops it
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.sources.model import HUB, LOCAL, URL, ModelSource, SourceFile
from app.sources.refs import HubRef, UrlRef, is_remote, parse_ref

if TYPE_CHECKING:
    from planner.model import ModelAnatomy

__all__ = [
    "HUB",
    "LOCAL",
    "URL",
    "ModelSource",
    "SourceFile",
    "canonical_ref",
    "is_remote",
    "load_anatomy",
    "local_path",
    "remember",
    "resolve_source",
    "set_note_sink",
]


_said: set[str] = set()


def _stderr_note(note: str) -> None:
    if note not in _said:  # a repo's quants share the same note
        _said.add(note)
        print(f"vramchat: note: {note}", file=sys.stderr)


_note_sink: Callable[[str], None] = _stderr_note


def set_note_sink(sink: Callable[[str], None] | None) -> None:
    """Where notes about remote models go (planned offline from the cache ...): stderr unless set (None
    sets stderr again)."""
    global _note_sink
    _note_sink = sink or _stderr_note


def hub_hosts() -> tuple[str, ...]:
    """Hosts whose /ORG/REPO/resolve/... URLs are the hub's: the HF_ENDPOINT's, when it is set."""
    endpoint = os.environ.get("HF_ENDPOINT", "")
    if not endpoint:
        return ()
    import urllib.parse

    parts = urllib.parse.urlsplit(endpoint)
    return tuple(h for h in (parts.hostname or "", parts.netloc) if h)


_resolved: dict[str, ModelSource] = {}


def resolve_source(text: str, fresh: bool = False) -> ModelSource:
    """The model `text` names. Remote ones are listed (hub) or asked (URL) the first time in this
    process (or when `fresh`), under the words given and under the model's own ref; raises SourceError."""
    if not fresh and text in _resolved:
        return _resolved[text]
    ref = parse_ref(text, hub_hosts())
    if isinstance(ref, HubRef):
        from app.sources import hub

        source = hub.resolve(ref)
    elif isinstance(ref, UrlRef):
        from app.sources import url

        source = url.resolve(ref)
    else:
        from app.sources.local import local_source

        return local_source(text)
    _resolved[text] = _resolved[source.ref] = source
    return source


def known_source(text: str) -> ModelSource | None:
    """The model `text` names where this process has resolved it already (never asks the network)."""
    return _resolved.get(text)


def remember(source: ModelSource) -> None:
    """Make `source` what its ref resolves to in this process (a repo listed once names all its models)."""
    _resolved[source.ref] = source


def canonical_ref(text: str) -> str:
    """What a plan calls the model `text` names: hf:ORG/REPO/FILE.gguf, the URL, or the path as given."""
    if not is_remote(text):
        return text
    return resolve_source(text).ref


def local_path(text: str) -> str:
    """A path llama.cpp can open for the model: the path itself, or for a remote model a sparse local
    copy of its headers (the weights read as zeros, nothing downloaded) for llama.cpp's dry run."""
    if not is_remote(text):
        return text
    from app.sources.sparse import sparse_copy

    return sparse_copy(resolve_source(text))


def load_anatomy(source: ModelSource) -> ModelAnatomy:
    """The model's anatomy, wherever it is; notes about it (offline, cached) go to the note sink."""
    for note in source.notes:
        _note_sink(note)
    if source.kind == LOCAL:
        from app.caches.headers import load_anatomy_cached

        return load_anatomy_cached(source.ref)
    from app.sources.headers import load_anatomy as remote_anatomy

    return remote_anatomy(source)

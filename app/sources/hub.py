"""The Hugging Face hub, through its own client: a repo's GGUF models, search, the most downloaded.

`huggingface_hub` is imported only here and in app/sources/http.py, when a remote model is asked for:
the request of `HfApi.model_info(files_metadata=True)` lists a repo (every file with its size and LFS
sha256), search is `HfApi.list_models`' request, both made through the library's session, headers and
error mapping; the endpoint, the token and offline mode are the library's (`HF_ENDPOINT`, `HF_TOKEN`,
`HF_HUB_OFFLINE`). A listing is kept (app/sources/remote_cache.py): offline, the last one seen is used.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.sources import remote_cache
from app.sources.errors import NotFound, SourceError, Unreachable
from app.sources.http import hub_failure
from app.sources.model import HUB, ModelSource, SourceFile
from app.sources.naming import is_gguf, is_projector, quant_of, shard_names
from app.sources.refs import HF_PREFIX, HubRef
from app.sources.safe_paths import check_name, check_repo_id, repo_id_problem

API_TIMEOUT = 15.0
DEFAULT_QUANT = "Q4_K_M"  # what llama.cpp's -hf picks when a repo has several quants and none is named


def endpoint() -> str:
    """The hub's address as huggingface_hub has it (HF_ENDPOINT), read at each call."""
    from huggingface_hub import constants

    return constants.ENDPOINT.rstrip("/")


def offline() -> bool:
    from huggingface_hub import constants

    return constants.is_offline_mode()


@dataclass(frozen=True)
class RepoListing:
    """A repo's files as the hub listed them at one commit."""

    repo_id: str
    commit: str
    gated: bool
    files: tuple[SourceFile, ...]  # every file, GGUF or not
    saved: float = 0.0  # when it was fetched (from the cache: when it was first seen)
    from_cache: str = ""  # why the cached listing is used ('' when fetched now)


@dataclass(frozen=True)
class RepoSummary:
    """One search result."""

    repo_id: str
    downloads: int
    likes: int
    gated: bool
    pipeline_tag: str | None
    last_modified: str | None = None


def file_url(repo_id: str, path: str, revision: str) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo_id, path, revision=revision, endpoint=endpoint())


def list_repo(repo_id: str, revision: str | None = None) -> RepoListing:
    """Every file of the repo with its size and checksum; offline, the listing seen last."""
    key = (endpoint(), repo_id, revision or "main")
    if offline():
        return _cached_listing(key, f"{HF_PREFIX}{repo_id}: offline mode (HF_HUB_OFFLINE) is on", "offline mode")
    try:
        info = _model_info(repo_id, revision)
    except Exception as exc:
        error = hub_failure(exc, f"{HF_PREFIX}{repo_id}")
        if error is None:
            raise
        if isinstance(error, Unreachable):
            return _cached_listing(key, str(error), "the hub cannot be reached")
        raise error from None
    commit = str(info.get("sha") or "")
    where = f"{HF_PREFIX}{repo_id}: the hub's listing"
    listed_id = check_repo_id(str(info.get("id") or repo_id), where)
    siblings = info.get("siblings") or []
    if not isinstance(siblings, list) or not all(isinstance(item, dict) for item in siblings):
        raise SourceError(f"{where} is not a list of files")
    files = tuple(_source_file(repo_id, item, commit or revision or "main", where) for item in siblings)
    listing = RepoListing(listed_id, commit, bool(info.get("gated")), files, time.time())
    remote_cache.keep_record(
        "listings",
        {
            "repo_id": listing.repo_id,
            "commit": listing.commit,
            "gated": listing.gated,
            "files": [[f.name, f.size, f.url, f.identity, f.sha256] for f in files],
        },
        *key,
    )
    return listing


def _model_info(repo_id: str, revision: str | None) -> dict[str, Any]:
    """`HfApi.model_info(repo_id, revision, files_metadata=True)`'s request, made the way it makes it
    (the library's session, headers and error mapping), without importing hf_api (150 ms of a start)."""
    import urllib.parse

    from huggingface_hub import get_session, hf_raise_for_status

    from app.sources.http import hub_headers

    url = f"{endpoint()}/api/models/{repo_id}"
    if revision is not None:
        url += f"/revision/{urllib.parse.quote(revision, safe='')}"
    response = get_session().get(url, headers=hub_headers(), params={"blobs": True}, timeout=API_TIMEOUT)
    hf_raise_for_status(response)
    info = response.json()
    if not isinstance(info, dict):
        raise SourceError(f"{HF_PREFIX}{repo_id}: the hub answered something that is not a model's info")
    return info


def _source_file(repo_id: str, item: dict[str, Any], revision: str, where: str) -> SourceFile:
    """One file of a listing; a name that is not a safe relative path refuses the whole listing (a real hub
    never sends one: a server that does is not trusted with any of its names)."""
    lfs = item.get("lfs") or None
    name = check_name(str(item.get("rfilename") or ""), where)
    try:
        size = int(lfs["size"] if lfs else item.get("size") or 0)
        sha256 = str(lfs["sha256"]) if lfs else None
    except (TypeError, KeyError, ValueError):
        raise SourceError(f"{where}: {name}: its size or checksum is not a number and a hash") from None
    if size < 0 or (sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", sha256)):
        raise SourceError(f"{where}: {name}: its size ({size:,}) or checksum ({sha256!r:.80}) makes no sense")
    return SourceFile(
        name=name,
        size=size,
        url=file_url(repo_id, name, revision),
        identity=f"sha256:{sha256}" if sha256 else f"git:{item['blobId']}" if item.get("blobId") else "",
        sha256=sha256,
    )


def _cached_listing(key: tuple[str, str, str], error: str, why: str) -> RepoListing:
    record = remote_cache.load_record("listings", *key)
    if record is None:
        raise Unreachable(f"{error}, and this repo was never listed before")
    where = f"{HF_PREFIX}{key[1]}: the listing kept from before"
    files = tuple(SourceFile(check_name(str(n), where), s, u, i, h) for n, s, u, i, h in record["files"])
    repo_id = check_repo_id(str(record["repo_id"]), where)
    return RepoListing(repo_id, record["commit"], record["gated"], files, record["saved"], why)


def repo_models(listing: RepoListing) -> list[ModelSource]:
    """The repo's models: each single GGUF, each split model once (its shards in order), with the
    projectors (mmproj*) of its folder or of the repo's top folder beside it; smallest first."""
    ggufs = [f for f in listing.files if is_gguf(f.name)]
    projectors = [f for f in ggufs if is_projector(f.name)]
    by_name = {f.name: f for f in ggufs}
    note = _offline_note(listing)
    models: list[ModelSource] = []
    seen: set[str] = set()
    for f in sorted(ggufs, key=lambda f: f.name):
        if is_projector(f.name) or f.name in seen:
            continue
        names = shard_names(f.name)
        seen.update(names)
        shards = [by_name[n] for n in names if n in by_name]
        missing = [n for n in names if n not in by_name]
        folder = posixpath.dirname(f.name)
        beside = [p for p in projectors if posixpath.dirname(p.name) == folder] or [
            p for p in projectors if not posixpath.dirname(p.name)
        ]
        models.append(
            ModelSource(
                kind=HUB,
                ref=f"{HF_PREFIX}{listing.repo_id}/{names[0]}",
                files=tuple(shards),
                projectors=tuple(beside),
                repo_id=listing.repo_id,
                revision=listing.commit,
                quant=quant_of(names[0]),
                problem=f"split model: {len(missing)} of {len(names)} shards missing" if missing else "",
                notes=(note,) if note else (),
            )
        )
    models.sort(key=lambda m: (m.size, m.ref))
    return models


def _offline_note(listing: RepoListing) -> str:
    if not listing.from_cache:
        return ""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(listing.saved))
    return f"{listing.from_cache}: {listing.repo_id} as listed on {when}"


def resolve(ref: HubRef) -> ModelSource:
    """The model `ref` names: its file (any shard names the whole split model), its quant, or the
    repo's only model (or its Q4_K_M, as llama.cpp's -hf chooses)."""
    listing = list_repo(ref.repo_id, ref.revision)
    models = repo_models(listing)
    where = f"{HF_PREFIX}{ref.repo_id}"
    if ref.file:
        wanted = shard_names(ref.file)[0]
        for model in models:
            if (model.files and shard_names(model.files[0].name)[0] == wanted) or model.ref.endswith("/" + wanted):
                return model
        if any(f.name == ref.file for f in listing.files):
            raise NotFound(f"{where}/{ref.file}: a projector or not a model file")
        raise NotFound(f"{where}/{ref.file}: no such file in the repository")
    if not models:
        raise NotFound(f"{where}: the repository holds no GGUF model")
    if ref.quant:
        wanted_quant = ref.quant.upper()
        exact = [m for m in models if m.quant == wanted_quant]
        loose = exact or [m for m in models if wanted_quant in m.file_name.upper()]
        if len(loose) == 1:
            return loose[0]
        if not loose:
            raise NotFound(f"{where}: no {ref.quant} file; it has {_quants(models)}")
        raise NotFound(f"{where}: {ref.quant} names {len(loose)} files ({_names(loose)}): name the file")
    if len(models) == 1:
        return models[0]
    default = [m for m in models if m.quant == DEFAULT_QUANT]
    if len(default) == 1:
        return default[0]
    raise NotFound(f"{where} holds {len(models)} models: add :QUANT ({_quants(models)}); --quants lists them")


def _quants(models: Iterable[ModelSource]) -> str:
    tags = [m.quant or m.file_name for m in models]
    return ", ".join(tags[:12]) + (f" and {len(tags) - 12} more" if len(tags) > 12 else "")


def _names(models: list[ModelSource]) -> str:
    return ", ".join(m.file_name for m in models[:4])


# -- search ------------------------------------------------------------------------------------------


def search_repos(query: str, limit: int = 30) -> list[RepoSummary]:
    """GGUF repos whose name holds `query`, the most downloaded first (the hub's own search)."""
    return _list_models({"search": query, "filter": "gguf", "sort": "downloads", "limit": limit})


def popular_chat_repos(limit: int = 30) -> list[RepoSummary]:
    """The hub's most downloaded GGUF text-generation repos."""
    return _list_models({"filter": "gguf", "pipeline_tag": "text-generation", "sort": "downloads", "limit": limit})


def seen_repos(query: str = "", limit: int = 30) -> list[RepoSummary]:
    """Repos of this hub listed before (their listing is kept), whose name holds `query`, the last seen
    first: what the hub view offers when the hub cannot be reached. Their downloads are not known (0)."""
    here = endpoint()
    words = query.strip().lower()
    out: list[RepoSummary] = []
    seen: set[str] = set()
    for record in remote_cache.records("listings"):
        key = record.get("key") or []
        repo_id = str(record.get("repo_id") or "")
        if len(key) != 3 or key[0] != here or not repo_id or repo_id in seen or words not in repo_id.lower():
            continue
        seen.add(repo_id)
        out.append(RepoSummary(repo_id, 0, 0, bool(record.get("gated")), None))
        if len(out) >= limit:
            break
    return out


def _list_models(params: dict[str, Any]) -> list[RepoSummary]:
    """The hub's /api/models, as HfApi.list_models asks it, in one page and one try: a search box wants
    an answer or an error in seconds, not list_models' five retries with back-off."""
    from huggingface_hub import hf_raise_for_status
    from huggingface_hub.utils import http_backoff

    from app.sources.http import hub_headers

    what = "searching the hub"
    if offline():
        raise Unreachable(f"{what}: offline mode (HF_HUB_OFFLINE) is on")
    try:
        response = http_backoff(
            "GET",
            f"{endpoint()}/api/models",
            params=params,
            headers=hub_headers(),
            timeout=API_TIMEOUT,
            max_retries=1,
            base_wait_time=0.5,
        )
        hf_raise_for_status(response)
        items = response.json()
    except Exception as exc:
        error = hub_failure(exc, what)
        if error is None:
            raise
        raise error from None
    if not isinstance(items, list):
        raise SourceError(f"{what}: the hub answered something that is not a list of models")
    out = []
    for item in items[: int(params.get("limit", len(items)))]:
        # an id the hub could never have (control characters, "../..") is no repository: left out
        if isinstance(item, dict) and item.get("id") and not repo_id_problem(str(item["id"])):
            out.append(
                RepoSummary(
                    repo_id=str(item["id"]),
                    downloads=int(item.get("downloads") or 0),
                    likes=int(item.get("likes") or 0),
                    gated=bool(item.get("gated")),
                    pipeline_tag=item.get("pipeline_tag"),
                    last_modified=item.get("lastModified"),
                )
            )
    return out

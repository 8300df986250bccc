"""Words that name a model somewhere else: a Hugging Face repo, a file in one, or an URL.

    hf:ORG/REPO                 a repository (--quants), or its one model / its Q4_K_M (--plan)
    hf:ORG/REPO:QUANT           the repo's model of that quant (Q4_K_M, UD-Q4_K_XL, ...)
    hf:ORG/REPO@REV/PATH.gguf   one file, at a revision (a branch, a tag or a commit)
    ORG/REPO/PATH.gguf          the same without `hf:` (when no such local file exists)
    https://HOST/.../FILE.gguf  any server that answers range requests; a hub file's own URL
                                (.../ORG/REPO/resolve/REV/PATH or /blob/) is read as the hub's
    https://huggingface.co/ORG/REPO   the repository's page (or /tree/REV): as hf:ORG/REPO

Anything that exists on this machine is a local path first.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass

HF_PREFIX = "hf:"
_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_REPO = re.compile(rf"^(?P<repo>{_PART}/{_PART})(?:@(?P<rev>[^/:]+))?(?::(?P<quant>[A-Za-z0-9_.-]+))?$")
_REPO_FILE = re.compile(rf"^(?P<repo>{_PART}/{_PART})(?:@(?P<rev>[^/:]+))?/(?P<file>.+\.gguf)$", re.IGNORECASE)
_HUB_URL_PATH = re.compile(rf"^/(?P<repo>{_PART}/{_PART})/(?:resolve|blob)/(?P<rev>[^/]+)/(?P<file>.+)$")
_HUB_REPO_PAGE = re.compile(rf"^/(?P<repo>{_PART}/{_PART})(?:/tree/(?P<rev>[^/]+))?/?$")  # the repo's own page
_HUB_HOSTS = ("huggingface.co", "hf.co")


@dataclass(frozen=True)
class HubRef:
    """A repository on the hub, or one file or quant of it."""

    repo_id: str
    revision: str | None = None
    file: str | None = None  # a path in the repository
    quant: str | None = None

    def __str__(self) -> str:
        text = f"{HF_PREFIX}{self.repo_id}" + (f"@{self.revision}" if self.revision else "")
        if self.file:
            return f"{text}/{self.file}"
        return f"{text}:{self.quant}" if self.quant else text


@dataclass(frozen=True)
class UrlRef:
    """A GGUF file at an http(s) URL."""

    url: str

    def __str__(self) -> str:
        return self.url


def parse_ref(text: str, hub_hosts: tuple[str, ...] = ()) -> HubRef | UrlRef | None:
    """The remote model `text` names, or None for a local path (or a word that names nothing remote).

    `hub_hosts`: hosts whose /ORG/REPO/resolve/... URLs are the hub's (besides huggingface.co): the
    HF_ENDPOINT's."""
    if not text:
        return None
    lowered = text.lower()
    if lowered.startswith(("http://", "https://")):
        parts = urllib.parse.urlsplit(text)
        host = (parts.hostname or "").lower()
        if host in _HUB_HOSTS or host in hub_hosts or parts.netloc.lower() in hub_hosts:
            path = urllib.parse.unquote(parts.path)
            match = _HUB_URL_PATH.match(path)
            if match:
                return HubRef(match["repo"], match["rev"], match["file"])
            page = _HUB_REPO_PAGE.match(path)
            if page and not page["repo"].lower().endswith(".gguf"):
                return HubRef(page["repo"], page["rev"])
        return UrlRef(text)
    if lowered.startswith(HF_PREFIX):
        body = text[len(HF_PREFIX) :].lstrip("/")
        return _hub_words(body) or HubRef(body)  # malformed: the listing says it does not exist
    if os.path.exists(text) or text.startswith((".", "/", "~")) or (os.sep == "\\" and ":" in text[:3]):
        return None
    ref = _hub_words(text)
    if ref is not None and ref.file is None and text.lower().endswith(".gguf"):
        return None  # DIR/FILE.gguf: a local file that is missing, not a repository
    return ref


def _hub_words(body: str) -> HubRef | None:
    match = _REPO_FILE.match(body)
    if match:
        return HubRef(match["repo"], match["rev"], match["file"])
    match = _REPO.match(body)
    if match:
        return HubRef(match["repo"], match["rev"], None, match["quant"])
    return None


def is_remote(text: str | None) -> bool:
    """Whether `text` names a model on the hub or at an URL rather than a local file."""
    return bool(text) and parse_ref(str(text)) is not None

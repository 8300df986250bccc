"""A local HTTP server for the remote-model tests: plain file URLs, and the Hugging Face hub's own endpoints.

The hub cannot be reached from the test machines, so the tests point `HF_ENDPOINT` at this server and
use the real `huggingface_hub` client against it. It answers what that client calls for vramchat's
use, with the status codes and headers the hub sends (read from huggingface_hub's source):

- `GET /api/models/{repo}[/revision/{rev}]` (model info; `?blobs=true` adds each file's size and LFS
  sha256), `GET /api/models?search=&filter=gguf&sort=downloads&limit=` (search, most downloaded first)
- `HEAD|GET /{repo}/resolve/{rev}/{path}`: a 302 to the "CDN" with `ETag`, `X-Repo-Commit`,
  `X-Linked-Size`, `X-Linked-Etag` (as the hub answers for an LFS file); the CDN, `/_cdn/{sha256}/{name}`
  on another host name (localhost: the same server), serves the bytes
- errors as the hub signals them: 401 + `X-Error-Code: RepoNotFound` (unknown repo), 401/403 +
  `GatedRepo` (a gated repo without / with the wrong token), 404 + `EntryNotFound`, `RevisionNotFound`

Every file URL has real Range semantics (206 + Content-Range, 416, suffix ranges), and the server can
misbehave on purpose: `mode = "no-range"` answers every GET whole with 200, `drop_at = N` closes the
connection after the body reaches byte N of the file (once), `surplus = N` sends N bytes more than the
file (with `length = "none"`: no Content-Length, the end said by closing; `"surplus"`: a Content-Length
that counts them), `trickle = S` sends the answers to paths under `trickle_prefix` as a slow-loris does
(the header lines, then the body, a few bytes every S seconds, for `TRICKLE_FOR` seconds at most).
Every request is logged with the body bytes sent and the User-Agent, for the "read only the header"
figures.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_CHUNK = 1 << 20
TRICKLE_FOR = 20.0  # seconds a slow-loris answer lasts at most (a client without limits then sees it end)
_hash_cache: dict[tuple[str, int, int], str] = {}
_hash_lock = threading.Lock()


def sha256_of(path: Path) -> str:
    """The file's sha256 (kept per path, size and modification time: the quant files are large sparse files)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        if key in _hash_cache:
            return _hash_cache[key]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(8 << 20):
            digest.update(block)
    with _hash_lock:
        _hash_cache[key] = digest.hexdigest()
    return _hash_cache[key]


@dataclass
class Logged:
    method: str
    path: str
    range: str | None
    status: int
    body_bytes: int
    user_agent: str = ""


@dataclass
class Repo:
    repo_id: str
    files: dict[str, Path]  # path in the repo -> local file
    commit: str
    gated: bool = False
    downloads: int = 0
    pipeline_tag: str = "text-generation"
    tags: list[str] = field(default_factory=lambda: ["gguf"])
    wrong_sha256: set[str] = field(default_factory=set)  # files whose published checksum is wrong
    listed_id: str | None = None  # the id its model info claims (a hostile hub: not the repo's own)

    def sibling(self, name: str) -> dict[str, Any]:
        path = self.files[name]
        size = path.stat().st_size
        sha = sha256_of(path)
        if name in self.wrong_sha256:
            sha = hashlib.sha256(sha.encode()).hexdigest()
        return {
            "rfilename": name,
            "size": size,
            "blobId": hashlib.sha1(f"pointer {sha}".encode()).hexdigest(),
            "lfs": {"size": size, "sha256": sha, "pointerSize": 134},
        }


class LocalHub:
    """The server; `with LocalHub() as hub:` starts it on 127.0.0.1 (a free port) and stops it."""

    def __init__(self, token: str = "hf_test_token") -> None:
        self.files: dict[str, Path] = {}  # /files/<name>
        self.repos: dict[str, Repo] = {}
        self.token = token
        self.mode = "normal"  # or "no-range"
        self.drop_at: int | None = None
        self.rate: int | None = None  # bytes per second a file is sent at (None: as fast as it goes)
        self.surplus = 0  # bytes sent past a file's end
        self.length = "exact"  # the Content-Length of a file sent with a surplus: exact, none, surplus
        self.trickle: float | None = None  # seconds between two dribbles of a slow-loris answer
        self.trickle_prefix = "/"  # the paths answered that way
        self.trickle_body_only = False  # the header lines at once, then the body slowly
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[Any] = set()
        self._thread: threading.Thread | None = None

    # -- set-up ------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._server is not None, "start the server first"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add_file(self, name: str, path: Path) -> str:
        """Serve `path` at a plain URL; returns the URL."""
        self.files[name] = Path(path)
        return f"{self.url}/files/{urllib.parse.quote(name)}"

    def add_repo(self, repo_id: str, files: dict[str, Path], **extra: Any) -> Repo:
        commit = hashlib.sha1(f"{repo_id}:{sorted(files)}".encode()).hexdigest()
        repo = Repo(repo_id, {k: Path(v) for k, v in files.items()}, commit, **extra)
        self.repos[repo_id] = repo
        return repo

    def bytes_sent(self, prefix: str = "") -> int:
        """Body bytes sent for requests whose path starts with `prefix`."""
        with self._lock:
            return sum(e.body_bytes for e in self.log if e.path.startswith(prefix))

    def requests(self, prefix: str = "") -> list[Logged]:
        with self._lock:
            return [e for e in self.log if e.path.startswith(prefix)]

    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()

    # -- life --------------------------------------------------------------------------------------

    def start(self, port: int = 0) -> LocalHub:
        """Listen on `port` (0: a free one; the port it had: the hub back after `stop`, as a network returns)."""
        hub = self

        class Handler(_Handler):
            server_hub = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-hub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection (a client's kept-alive one too): as offline."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            open_now = list(self._connections)
        for connection in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_hub: LocalHub

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        with self.server_hub._lock:
            self.server_hub._connections.add(self.connection)

    def finish(self) -> None:
        with self.server_hub._lock:
            self.server_hub._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    # -- routing -----------------------------------------------------------------------------------

    def _route(self, head: bool) -> None:
        hub = self.server_hub
        parsed = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(parsed.path)
        query = urllib.parse.parse_qs(parsed.query)
        try:
            if path.startswith("/files/"):
                local = hub.files.get(path[len("/files/") :])
                if local is None:
                    return self._plain(404, b"not found", head)
                return self._serve_file(local, head, etag=f'"{_weak_tag(local)}"')
            if path.startswith("/_cdn/"):
                sha = path.split("/")[2]
                for repo in hub.repos.values():
                    for name, local in repo.files.items():
                        if repo.sibling(name)["lfs"]["sha256"] == sha:
                            return self._serve_file(local, head, etag=f'"{sha}"')
                return self._plain(404, b"no such blob", head)
            if path == "/api/models":
                return self._search(query, head)
            if path.startswith("/api/models/"):
                return self._model_info(path[len("/api/models/") :], head)
            match = re.match(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$", path)
            if match:
                return self._resolve(match["repo"], match["rev"], match["file"], head)
            return self._plain(404, b"not found", head)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _repo_or_error(self, repo_id: str, head: bool, for_files: bool) -> Repo | None:
        hub = self.server_hub
        repo = hub.repos.get(repo_id)
        if repo is None:
            self._error(401, "RepoNotFound", "Repository not found", head)
            return None
        if for_files and repo.gated:
            auth = self.headers.get("Authorization", "")
            if not auth:
                self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it and be authenticated "
                    "to access it. Please log in.",
                    head,
                )
                return None
            if auth != f"Bearer {hub.token}":
                self._error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the authorized list.",
                    head,
                )
                return None
        return repo

    def _model_info(self, rest: str, head: bool) -> None:
        parts = rest.split("/")
        repo_id = "/".join(parts[:2])
        repo = self._repo_or_error(repo_id, head, for_files=False)
        if repo is None:
            return
        if len(parts) >= 4 and parts[2] == "revision" and parts[3] not in ("main", repo.commit):
            return self._error(404, "RevisionNotFound", "Invalid rev id", head)
        body = {
            "_id": repo.commit[:24],
            "id": repo.listed_id or repo.repo_id,
            "modelId": repo.listed_id or repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": repo.commit,
            "private": False,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "downloads": repo.downloads,
            "likes": 0,
            "tags": repo.tags,
            "pipeline_tag": repo.pipeline_tag,
            "library_name": "gguf",
            "siblings": [repo.sibling(name) for name in sorted(repo.files)],
        }
        self._json(200, body, head, {"X-Repo-Commit": repo.commit})

    def _search(self, query: dict[str, list[str]], head: bool) -> None:
        hub = self.server_hub
        words = (query.get("search") or [""])[0].lower()
        filters = query.get("filter") or []
        pipeline = (query.get("pipeline_tag") or [""])[0] or None
        found = [
            r
            for r in hub.repos.values()
            if words in r.repo_id.lower()
            and all(f in r.tags for f in filters)
            and (pipeline is None or r.pipeline_tag == pipeline)
        ]
        if (query.get("sort") or [""])[0] == "downloads":
            found.sort(key=lambda r: -r.downloads)
        limit = int((query.get("limit") or ["1000"])[0])
        items = [
            {
                "_id": r.commit[:24],
                "id": r.repo_id,
                "modelId": r.repo_id,
                "downloads": r.downloads,
                "likes": 0,
                "private": False,
                "gated": "manual" if r.gated else False,
                "tags": r.tags,
                "pipeline_tag": r.pipeline_tag,
                "library_name": "gguf",
            }
            for r in found[:limit]
        ]
        self._json(200, items, head)

    def _resolve(self, repo_id: str, revision: str, name: str, head: bool) -> None:
        repo = self._repo_or_error(repo_id, head, for_files=True)
        if repo is None:
            return
        if revision not in ("main", repo.commit):
            return self._error(404, "RevisionNotFound", "Invalid rev id", head)
        local = repo.files.get(name)
        if local is None:
            return self._error(404, "EntryNotFound", f"{name} does not exist on {revision}", head)
        sha = repo.sibling(name)["lfs"]["sha256"]
        size = local.stat().st_size
        # the CDN is another host (as the hub's is): huggingface_hub reads the metadata off this redirect
        cdn = self.server_hub.url.replace("127.0.0.1", "localhost")
        location = f"{cdn}/_cdn/{sha}/{urllib.parse.quote(os.path.basename(name))}"
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("ETag", f'"{repo.sibling(name)["blobId"]}"')
        self.send_header("X-Linked-Etag", f'"{sha}"')
        self.send_header("X-Linked-Size", str(size))
        self.send_header("X-Repo-Commit", repo.commit)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", "0")
        self.end_headers()
        self._log(302, 0)

    # -- responses ---------------------------------------------------------------------------------

    def _log(self, status: int, body: int) -> None:
        agent = self.headers.get("User-Agent", "")
        self.server_hub._record(Logged(self.command, self.path, self.headers.get("Range"), status, body, agent))

    def _trickling(self) -> bool:
        hub = self.server_hub
        return hub.trickle is not None and urllib.parse.urlsplit(self.path).path.startswith(hub.trickle_prefix)

    def _dribble(self, data: bytes, until: float) -> bool:
        """Send `data` a few bytes at a time, a pause between each; False once the time is up or the
        client has gone."""
        pause = self.server_hub.trickle or 0.0
        for i in range(0, len(data), 4):
            if time.monotonic() > until:
                return False
            try:
                self.wfile.write(data[i : i + 4])
                self.wfile.flush()
            except OSError:
                return False
            time.sleep(pause)
        return True

    def _slow_loris(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        """The answer, a few bytes every `trickle` seconds: its header lines, then its body."""
        until = time.monotonic() + TRICKLE_FOR
        lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"] + [f"{k}: {v}" for k, v in headers]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode()
        if self.server_hub.trickle_body_only:
            self.wfile.write(head)
            sent = self._dribble(body, until)
        else:
            sent = self._dribble(head, until) and self._dribble(body, until)
        self.close_connection = True
        self._log(status, len(body) if sent else 0)

    def _plain(self, status: int, body: bytes, head: bool, headers: dict[str, str] | None = None) -> None:
        if self._trickling():
            listed = [*(headers or {}).items(), ("Content-Length", str(len(body)))]
            return self._slow_loris(status, listed, b"" if head else body)
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self._log(status, 0 if head else len(body))

    def _json(self, status: int, body: Any, head: bool, headers: dict[str, str] | None = None) -> None:
        self._plain(status, json.dumps(body).encode(), head, {"Content-Type": "application/json", **(headers or {})})

    def _error(self, status: int, code: str, message: str, head: bool) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message}
        self._plain(status, body, head, headers)

    def _serve_file(self, local: Path, head: bool, etag: str) -> None:
        hub = self.server_hub
        size = local.stat().st_size
        start, end = 0, size  # [start, end)
        status = 200
        asked = self.headers.get("Range")
        if asked and hub.mode != "no-range":
            match = _RANGE.match(asked.strip())
            if match is None or (not match[1] and not match[2]):
                return self._plain(416, b"", head, {"Content-Range": f"bytes */{size}"})
            if match[1]:
                start = int(match[1])
                end = min(int(match[2]) + 1, size) if match[2] else size
            else:  # a suffix: the last N bytes
                start, end = max(size - int(match[2]), 0), size
            if start >= size or end <= start:
                return self._plain(416, b"", head, {"Content-Range": f"bytes */{size}"})
            status = 206
        headers = [
            ("Content-Type", "application/octet-stream"),
            ("Content-Length", str(end - start)),
            ("ETag", etag),
            ("Last-Modified", self.date_time_string(int(local.stat().st_mtime))),
        ]
        if hub.mode != "no-range":
            headers.append(("Accept-Ranges", "bytes"))
        if status == 206:
            headers.append(("Content-Range", f"bytes {start}-{end - 1}/{size}"))
        if self._trickling():
            with local.open("rb") as handle:
                handle.seek(start)
                return self._slow_loris(status, headers, b"" if head else handle.read(min(end - start, 1 << 16)))
        if hub.surplus and not head:
            return self._serve_with_surplus(local, status, headers, start, end)
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        if head:
            return self._log(status, 0)
        sent = 0
        with local.open("rb") as handle:
            handle.seek(start)
            pos = start
            while pos < end:
                stop = min(end, pos + (max(hub.rate // 20, 4096) if hub.rate else _CHUNK))
                drop = hub.drop_at
                if drop is not None and pos < drop <= stop:
                    stop = drop
                block = handle.read(stop - pos)
                if hub.rate:
                    time.sleep(len(block) / hub.rate)
                try:
                    self.wfile.write(block)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                    return self._log(status, sent)
                sent += len(block)
                pos = stop
                if drop is not None and pos == drop:
                    hub.drop_at = None  # once: the next request gets the rest
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return self._log(status, sent)
        self._log(status, sent)

    def _serve_with_surplus(
        self, local: Path, status: int, headers: list[tuple[str, str]], start: int, end: int
    ) -> None:
        """The file's bytes, then `surplus` bytes more (its Content-Length as `length` says)."""
        hub = self.server_hub
        self.send_response(status)
        for key, value in headers:
            if key != "Content-Length":
                self.send_header(key, value)
        if hub.length == "exact":
            self.send_header("Content-Length", str(end - start))
        elif hub.length == "surplus":
            self.send_header("Content-Length", str(end - start + hub.surplus))
        self.send_header("Connection", "close")  # without a length, the end of the body is the end of the connection
        self.end_headers()
        self.close_connection = True
        sent = 0
        try:
            with local.open("rb") as handle:
                handle.seek(start)
                while sent < end - start:
                    block = handle.read(min(_CHUNK, end - start - sent))
                    self.wfile.write(block)
                    sent += len(block)
            left = hub.surplus
            while left > 0:
                self.wfile.write(b"\x00" * min(left, _CHUNK))
                sent += min(left, _CHUNK)
                left -= _CHUNK
        except OSError:
            pass
        self._log(status, sent)


def _weak_tag(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size:x}-{st.st_mtime_ns:x}"

"""Byte ranges over HTTP, for the hub and for plain URLs, with every failure in one line.

The hub is read through `huggingface_hub`'s own HTTP session (`get_session`: it honours
`HF_HUB_OFFLINE`, follows the hub's redirects to its CDN) with its headers (`build_hf_headers`:
`HF_TOKEN`, the user agent) and its error mapping (`hf_raise_for_status`: gated, not found), as
`HfFileSystem` reads a range. Plain URLs use a client of the same library (httpx2, the one
huggingface_hub 2.x is built on) without the hub's token.

Every range is read as a stream: a server that ignores the Range header and starts sending the
whole file (tens of GB) is refused after its status line, not read. Every request of both clients runs
under app/sources/deadline.py's limits: a server that answers a byte at a time cannot hold one for ever.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from app import __version__
from app.sources.deadline import BoundedTransport, is_over_limit, reason
from app.sources.errors import Gated, NoRangeSupport, NotFound, SourceError, Unreachable

if TYPE_CHECKING:
    import httpx2

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 20.0
RETRIES = 2  # a dropped connection or a timeout mid-read is tried again this many times

_url_client: httpx2.Client | None = None
_url_client_lock = threading.Lock()


def url_client() -> httpx2.Client:
    """One client for plain URLs, shared by the threads that read headers in parallel."""
    global _url_client
    with _url_client_lock:
        if _url_client is None:
            import httpx2

            _url_client = httpx2.Client(
                follow_redirects=True,
                timeout=httpx2.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT),
                transport=BoundedTransport(limits=httpx2.Limits(max_connections=32, max_keepalive_connections=16)),
                headers={"User-Agent": f"vramchat/{__version__}"},
            )
        return _url_client


def _bounded_hub_session() -> httpx2.Client:
    """huggingface_hub's own client (its request hook, redirects), on a transport with vramchat's limits."""
    import httpx2
    from huggingface_hub.utils import _http as hf_http

    hooks = [hf_http.hf_request_event_hook] if hasattr(hf_http, "hf_request_event_hook") else []
    return httpx2.Client(
        event_hooks={"request": hooks},
        follow_redirects=True,
        timeout=None,
        transport=BoundedTransport(),
        # what the library asks on its own (its agent-harness registry) says who asks too
        headers={"User-Agent": f"vramchat/{__version__}"},
    )


def _bound_the_hub_session() -> None:
    """Every request huggingface_hub makes in this process (vramchat's and its own) gets the limits. Done
    when this module is imported: app/sources/hub.py takes the session before it asks for headers."""
    from huggingface_hub import set_client_factory

    set_client_factory(_bounded_hub_session)


_bound_the_hub_session()


def hub_client() -> httpx2.Client:
    from huggingface_hub import get_session

    return get_session()


def hub_headers() -> dict[str, str]:
    from huggingface_hub.utils import build_hf_headers

    return build_hf_headers(library_name="vramchat", library_version=__version__)


def host_of(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url


# -- errors ------------------------------------------------------------------------------------------


def hub_failure(exc: BaseException, what: str) -> SourceError | None:
    """The one-line error for a failure of huggingface_hub (or its session); None if it is none of those."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        DisabledRepoError,
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, OfflineModeIsEnabled):
        return Unreachable(f"{what}: offline mode (HF_HUB_OFFLINE) is on and it was never read before")
    if isinstance(exc, GatedRepoError):
        from huggingface_hub import get_token

        repo = getattr(exc, "repo_id", None) or what
        page = f"{constants.ENDPOINT}/{repo}"
        if get_token():
            return Gated(
                f"{repo} is a gated repository and the token in use has no access: accept its conditions on {page}"
            )
        return Gated(
            f"{repo} is a gated repository: accept its conditions on {page} "
            "and set HF_TOKEN to a token of that account (or run `hf auth login`)"
        )
    if isinstance(exc, RevisionNotFoundError):
        return NotFound(f"{what}: no such revision on the hub")
    if isinstance(exc, RemoteEntryNotFoundError):
        return NotFound(f"{what}: no such file in the repository")
    if isinstance(exc, DisabledRepoError):
        return NotFound(f"{what}: the repository is disabled on the hub")
    if isinstance(exc, RepositoryNotFoundError):
        return NotFound(f"{what}: no such repository on the hub (a private one needs HF_TOKEN)")
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return SourceError(f"{what}: the hub answered HTTP {status}")
    return network_failure(exc, what)


def network_failure(exc: BaseException, what: str) -> SourceError | None:
    """The one-line error for a transport failure (no network, no answer, a cut connection)."""
    import httpx2

    if isinstance(exc, httpx2.ConnectError):
        return Unreachable(f"{what}: cannot connect ({_reason(exc)}); is this machine online?")
    if is_over_limit(exc):
        return Unreachable(f"{what}: {reason(exc)}; try again later, or another server")
    if isinstance(exc, httpx2.TimeoutException):
        return Unreachable(f"{what}: the server did not answer in time")
    if isinstance(exc, (httpx2.RemoteProtocolError, httpx2.ReadError)):
        return SourceError(f"{what}: the connection was cut ({_reason(exc)})")
    if isinstance(exc, httpx2.TransportError):
        return Unreachable(f"{what}: {_reason(exc)}")
    if isinstance(exc, httpx2.InvalidURL if hasattr(httpx2, "InvalidURL") else ()):
        return NotFound(f"{what}: not a valid URL")
    return None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:160] if text else type(exc).__name__


def http_status_failure(status: int, what: str) -> SourceError:
    if status in (401, 403):
        return Gated(f"{what}: the server refuses access (HTTP {status})")
    if status in (404, 410):
        return NotFound(f"{what}: no such file on the server (HTTP {status})")
    return SourceError(f"{what}: the server answered HTTP {status}")


# -- ranges ------------------------------------------------------------------------------------------


@contextmanager
def translated(what: str, hub: bool) -> Iterator[None]:
    """Turn whatever the HTTP layers raise into one SourceError line."""
    try:
        yield
    except SourceError:
        raise
    except Exception as exc:
        error = hub_failure(exc, what) if hub else network_failure(exc, what)
        if error is None:
            raise
        raise error from None


def read_range(
    url: str,
    start: int,
    end: int,
    *,
    hub: bool,
    what: str,
    headers: dict[str, str] | None = None,
    on_response: Callable[[Any], None] | None = None,
) -> bytes:
    """Bytes [start, end) of the file at `url`; a transient cut is tried again. A server that sends the
    whole file instead is refused (unless the whole file is what was asked for)."""
    import httpx2

    for attempt in range(RETRIES + 1):
        try:
            with translated(what, hub):
                return _read_range_once(url, start, end, hub, what, headers, on_response)
        except SourceError as exc:
            cause = exc.__context__ or exc.__cause__
            transient = isinstance(cause, (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.ReadTimeout))
            transient = transient and cause is not None and not is_over_limit(cause)  # too slow once: as slow again
            if not transient or attempt == RETRIES:
                raise
    raise AssertionError("unreachable")


def _read_range_once(
    url: str,
    start: int,
    end: int,
    hub: bool,
    what: str,
    headers: dict[str, str] | None,
    on_response: Callable[[Any], None] | None,
) -> bytes:
    client = hub_client() if hub else url_client()
    sent = {**(hub_headers() if hub else {}), **(headers or {})}
    sent["Range"] = f"bytes={start}-{end - 1}"
    sent["Accept-Encoding"] = "identity"
    with client.stream("GET", url, headers=sent) as response:
        status = response.status_code
        if on_response is not None:
            on_response(response)
        if status == 206:
            content_range = response.headers.get("Content-Range", "")
            first = content_range_start(content_range)
            if first != start:
                raise SourceError(f"{what}: asked for byte {start:,} on, the server sent from byte {first}")
            total = content_range_total(content_range)  # a file shorter than the range asked for
            return _body(response, min(end, total) - start if total is not None else end - start, what)
        if status == 200:
            length = _int(response.headers.get("Content-Length"))
            if start == 0 and length is not None and length <= end - start:
                return _body(response, length, what)  # a small file sent whole: what was asked for
            raise NoRangeSupport(
                f"{what}: the server at {host_of(url)} sends whole files only (no HTTP range requests), "
                "so the header cannot be read without downloading the model"
            )
        if status == 416:
            total = content_range_total(response.headers.get("Content-Range", ""))
            if total is not None and start >= total:
                return b""  # nothing there: the file is shorter (or empty); the reader says what that means
            raise SourceError(f"{what}: the server says bytes {start:,}-{end - 1:,} lie past the end of the file")
        response.read()
        if hub:
            from huggingface_hub import hf_raise_for_status

            hf_raise_for_status(response)
        raise http_status_failure(status, what)


def _body(response: Any, length: int, what: str) -> bytes:
    parts: list[bytes] = []
    got = 0
    for chunk in response.iter_bytes():
        parts.append(chunk)
        got += len(chunk)
        if got >= length:
            break
    data = b"".join(parts)
    if len(data) < length:
        raise SourceError(f"{what}: the server sent {len(data):,} of {length:,} bytes")
    return data[:length]


def content_range_start(content_range: str) -> int | None:
    try:
        return int(content_range.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def content_range_total(content_range: str) -> int | None:
    """The file's size in a Content-Range header (`bytes 0-99/1234`, `bytes */1234`)."""
    try:
        return int(content_range.rsplit("/", 1)[1])
    except (IndexError, ValueError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None

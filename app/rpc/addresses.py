"""Addresses for `serve-rpc`: the IP literal it listens on, and the ones clients can reach it at.

ggml-rpc's server takes an IPv4 literal only (`inet_addr` on an AF_INET socket in the pinned
transport.cpp), so a host name is resolved here first; and 0.0.0.0 listens everywhere but cannot
be connected to, so clients are told this machine's own addresses instead. Nothing here contacts
anything beyond this machine: the interfaces are read, and the host name resolved as the system does.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket

EVERYWHERE = "0.0.0.0"


def listen_address(host: str) -> str:
    """The IPv4 literal `host` names (itself for a literal; 127.1 is 127.0.0.1). Raises ValueError
    with the reason when it names none."""
    try:
        found = socket.getaddrinfo(host, None, family=socket.AF_INET, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(
            f"--host {host}: it names no IPv4 address here ({reason}); llama.cpp's RPC server listens on "
            "IPv4 addresses only: give one, such as 127.0.0.1 (this machine) or 0.0.0.0 (every network)"
        ) from None
    return str(found[0][4][0])


def is_loopback(address: str) -> bool:
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(address).is_loopback
    return False


def reachable_addresses() -> list[str]:
    """This machine's IPv4 addresses other machines may reach it at: its interfaces' (loopback and
    link-local left out), else what its host name resolves to. Empty when neither says."""
    found: list[str] = []
    with contextlib.suppress(Exception):
        import psutil

        for entries in psutil.net_if_addrs().values():
            found += [e.address for e in entries if e.family == socket.AF_INET]
    if not found:
        with contextlib.suppress(OSError):
            found = socket.gethostbyname_ex(socket.gethostname())[2]
    usable = []
    for address in found:
        with contextlib.suppress(ValueError):
            ip = ipaddress.ip_address(address)
            if not (ip.is_loopback or ip.is_link_local or ip.is_unspecified) and address not in usable:
                usable.append(address)
    return usable

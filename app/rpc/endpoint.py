"""RPC server addresses as the user writes them: HOST:PORT, several separated by commas."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_PORT = 50052  # llama.cpp's rpc-server default
# the servers this vramchat uses, HOST:PORT,HOST:PORT: set by --rpc (or the settings) in the app's
# process, and so inherited by the engine and probe processes it starts
RPC_ENV = "VRAMCHAT_RPC"


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:  # ggml-rpc's own spelling, also the key of its connections
        return f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        import ipaddress

        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_endpoint(text: str, default_port: int | None = None) -> Endpoint:
    """One HOST:PORT. Raises ValueError with the reason (ggml-rpc splits at the first colon, so
    IPv6 addresses cannot be given)."""
    text = text.strip()
    if text.count(":") > 1 or text.startswith("["):
        raise ValueError(f"{text!r}: llama.cpp's RPC takes HOST:PORT with one colon (no IPv6 addresses)")
    host, sep, port_text = text.partition(":")
    if not sep:
        if default_port is None:
            raise ValueError(f"{text!r}: give the server as HOST:PORT (rpc-server listens on {DEFAULT_PORT})")
        port_text = str(default_port)
    if not host:
        raise ValueError(f"{text!r}: the host is missing (HOST:PORT)")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"{text!r}: the port {port_text!r} is not a number") from None
    if not 0 < port < 65536:
        raise ValueError(f"{text!r}: the port must be between 1 and 65535")
    return Endpoint(host, port)


def parse_endpoints(text: str) -> list[Endpoint]:
    """HOST:PORT[,HOST:PORT...], each once, in the order given (llama.cpp numbers the devices so)."""
    out: list[Endpoint] = []
    for part in text.split(","):
        if not part.strip():
            continue
        endpoint = parse_endpoint(part)
        if endpoint in out:
            raise ValueError(f"{endpoint} is given twice")
        out.append(endpoint)
    if not out:
        raise ValueError("no RPC server given (HOST:PORT[,HOST:PORT...])")
    return out


def configured_endpoints() -> list[Endpoint]:
    """The RPC servers this process was told to use (none when unset; a malformed value raises ValueError)."""
    text = os.environ.get(RPC_ENV, "").strip()
    return parse_endpoints(text) if text else []


def use_endpoints(endpoints: list[Endpoint]) -> None:
    """Use these servers from now on, here and in every process started after."""
    if endpoints:
        os.environ[RPC_ENV] = ",".join(str(e) for e in endpoints)
    else:
        os.environ.pop(RPC_ENV, None)

"""Ask an RPC server what it lends, in Python, with a timeout on every step.

ggml-rpc's own client has no timeouts: an unreachable host or a server busy with another
client (it serves one at a time) would block the caller. So before llama.cpp connects,
vramchat speaks the few commands of the protocol it needs itself (pinned build: protocol
7.x, ggml/src/ggml-rpc/ggml-rpc.cpp): HELLO, DEVICE_COUNT, and per device GET_DEVICE_MEMORY,
GET_ALIGNMENT and GET_MAX_SIZE. Each request is | command (1 byte) | size (u64) | data |, each
answer | size (u64) | data |, little-endian. The connection is closed at once after.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

from app.errors import VramchatError
from app.rpc.endpoint import Endpoint

PROTOCOL_MAJOR = 7  # RPC_PROTO_MAJOR_VERSION of the pinned ggml-rpc
CONN_CAPS_SIZE = 24  # RPC_CONN_CAPS_SIZE: transport capabilities; all zero asks for plain TCP
CMD_GET_ALIGNMENT = 1
CMD_GET_MAX_SIZE = 2
CMD_GET_DEVICE_MEMORY = 11
CMD_HELLO = 14
CMD_DEVICE_COUNT = 15
DEFAULT_TIMEOUT = 3.0


class RpcError(VramchatError, RuntimeError):
    title = "RPC server"


@dataclass(frozen=True)
class RemoteDevice:
    index: int  # the device's number on its server
    free: int
    total: int
    alignment: int
    max_size: int


@dataclass(frozen=True)
class ServerInfo:
    endpoint: Endpoint
    version: tuple[int, int, int]
    devices: list[RemoteDevice] = field(default_factory=list)


class _Connection:
    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        try:
            self.sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
        except TimeoutError:
            raise RpcError(f"{endpoint}: no answer within {timeout:g} s (a firewall, or no such host)") from None
        except ConnectionRefusedError:
            raise RpcError(
                f"{endpoint}: connection refused (is `vramchat serve-rpc` or rpc-server running there?)"
            ) from None
        except OSError as exc:
            raise RpcError(f"{endpoint}: cannot connect ({exc.strerror or exc})") from None

    def close(self) -> None:
        self.sock.close()

    def _recv(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except TimeoutError:
                raise RpcError(
                    f"{self.endpoint}: the server did not answer within {self.timeout:g} s "
                    "(it serves one client at a time: is another one connected?)"
                ) from None
            except OSError as exc:
                raise RpcError(f"{self.endpoint}: the connection failed ({exc.strerror or exc})") from None
            if not chunk:
                raise RpcError(f"{self.endpoint}: the server closed the connection (not a llama.cpp RPC server?)")
            data += chunk
        return bytes(data)

    def call(self, command: int, payload: bytes, answer_size: int) -> bytes:
        try:
            self.sock.sendall(struct.pack("<BQ", command, len(payload)) + payload)
        except OSError as exc:
            raise RpcError(f"{self.endpoint}: the connection failed ({exc.strerror or exc})") from None
        (size,) = struct.unpack("<Q", self._recv(8))
        if size != answer_size:
            raise RpcError(
                f"{self.endpoint}: unexpected answer ({size} bytes, not {answer_size}): not a llama.cpp RPC server?"
            )
        return self._recv(size)


def query_server(endpoint: Endpoint, timeout: float = DEFAULT_TIMEOUT) -> ServerInfo:
    """The server's protocol version and each device's free and total memory. Raises RpcError with
    the reason when it cannot be reached, does not answer in time, or speaks another protocol."""
    conn = _Connection(endpoint, timeout)
    try:
        hello = conn.call(CMD_HELLO, bytes(CONN_CAPS_SIZE), 4 + CONN_CAPS_SIZE)
        version = (hello[0], hello[1], hello[2])
        if version[0] != PROTOCOL_MAJOR:
            raise RpcError(
                f"{endpoint}: the server speaks RPC protocol {version[0]}.{version[1]}, this vramchat's llama.cpp "
                f"{PROTOCOL_MAJOR}.x: run the same llama.cpp version on both machines"
            )
        (count,) = struct.unpack("<I", conn.call(CMD_DEVICE_COUNT, b"", 4))
        devices = []
        for index in range(count):
            request = struct.pack("<I", index)
            free, total = struct.unpack("<QQ", conn.call(CMD_GET_DEVICE_MEMORY, request, 16))
            (alignment,) = struct.unpack("<Q", conn.call(CMD_GET_ALIGNMENT, request, 8))
            (max_size,) = struct.unpack("<Q", conn.call(CMD_GET_MAX_SIZE, request, 8))
            devices.append(RemoteDevice(index, free, total, alignment, max_size))
        return ServerInfo(endpoint, version, devices)
    finally:
        conn.close()

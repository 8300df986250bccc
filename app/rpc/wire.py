"""Ask an RPC server what it lends, in Python, with a timeout on every step.

ggml-rpc's own client has no timeouts: an unreachable host or a server busy with another
client (it serves one at a time) would block the caller. So before llama.cpp connects,
vramchat speaks the few commands of the protocol it needs itself (pinned build: protocol
7.x, ggml/src/ggml-rpc/ggml-rpc.cpp): HELLO, DEVICE_COUNT, and per device GET_DEVICE_MEMORY,
GET_ALIGNMENT and GET_MAX_SIZE. Each request is | command (1 byte) | size (u64) | data |, each
answer | size (u64) | data |, little-endian. The connection is closed at once after.

A server is not trusted: its whole answer must come within QUERY_DEADLINE (a server that sends a
byte every few seconds is cut off), and its figures must make sense (sanity.py) before a plan
counts on them.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

from app.errors import VramchatError
from app.rpc.endpoint import Endpoint
from app.rpc.sanity import device_count_problem, device_memory_problem

PROTOCOL_MAJOR = 7  # RPC_PROTO_MAJOR_VERSION of the pinned ggml-rpc
CONN_CAPS_SIZE = 24  # RPC_CONN_CAPS_SIZE: transport capabilities; all zero asks for plain TCP
CMD_GET_ALIGNMENT = 1
CMD_GET_MAX_SIZE = 2
CMD_GET_DEVICE_MEMORY = 11
CMD_HELLO = 14
CMD_DEVICE_COUNT = 15
CPU_ALIGNMENT = 32  # ggml-cpu's TENSOR_ALIGNMENT
NO_SIZE_LIMIT = 2**64 - 1  # SIZE_MAX: what a buffer type that sets no largest buffer answers
DEFAULT_TIMEOUT = 3.0  # per step: connect, or one read
QUERY_DEADLINE = 10.0  # the whole query, connect to close: every read shares it


class RpcError(VramchatError, RuntimeError):
    title = "RPC server"


@dataclass(frozen=True)
class RemoteDevice:
    index: int  # the device's number on its server
    free: int
    total: int
    alignment: int
    max_size: int

    @property
    def is_cpu(self) -> bool:
        """Whether the server lends a CPU (`serve-rpc` on a machine without a GPU). The protocol has no
        command that says a device's type, and ggml-rpc's client calls every device a GPU; but ggml's CPU
        buffers are the only ones with both a 32-byte alignment (TENSOR_ALIGNMENT) and no size limit
        (SIZE_MAX): CUDA, ROCm and SYCL align to 128, Metal and Vulkan set a largest buffer."""
        return self.alignment == CPU_ALIGNMENT and self.max_size == NO_SIZE_LIMIT


@dataclass(frozen=True)
class ServerInfo:
    endpoint: Endpoint
    version: tuple[int, int, int]
    devices: list[RemoteDevice] = field(default_factory=list)


class _Connection:
    def __init__(self, endpoint: Endpoint, timeout: float, deadline: float) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.deadline = deadline
        self.ends_at = time.monotonic() + deadline
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
            left = self.ends_at - time.monotonic()
            if left <= 0:
                raise self._too_slow()
            try:
                self.sock.settimeout(min(self.timeout, left))
                chunk = self.sock.recv(n - len(data))
            except TimeoutError:
                if time.monotonic() >= self.ends_at:
                    raise self._too_slow() from None
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

    def _too_slow(self) -> RpcError:
        return RpcError(
            f"{self.endpoint}: the server did not finish answering within {self.deadline:g} s "
            "(a slow network, or not a llama.cpp RPC server?)"
        )

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


def query_server(endpoint: Endpoint, timeout: float = DEFAULT_TIMEOUT, deadline: float | None = None) -> ServerInfo:
    """The server's protocol version and each device's free and total memory. Raises RpcError with
    the reason when it cannot be reached, does not answer in time (`timeout` per step, `deadline`
    for the whole query, QUERY_DEADLINE by default), speaks another protocol or claims what no
    llama.cpp server would."""
    conn = _Connection(endpoint, timeout, QUERY_DEADLINE if deadline is None else deadline)
    try:
        hello = conn.call(CMD_HELLO, bytes(CONN_CAPS_SIZE), 4 + CONN_CAPS_SIZE)
        version = (hello[0], hello[1], hello[2])
        if version[0] != PROTOCOL_MAJOR:
            raise RpcError(
                f"{endpoint}: the server speaks RPC protocol {version[0]}.{version[1]}, this vramchat's llama.cpp "
                f"{PROTOCOL_MAJOR}.x: run the same llama.cpp version on both machines"
            )
        (count,) = struct.unpack("<I", conn.call(CMD_DEVICE_COUNT, b"", 4))
        _believe(endpoint, device_count_problem(count))
        devices = []
        for index in range(count):
            request = struct.pack("<I", index)
            free, total = struct.unpack("<QQ", conn.call(CMD_GET_DEVICE_MEMORY, request, 16))
            _believe(endpoint, device_memory_problem(index, free, total))
            (alignment,) = struct.unpack("<Q", conn.call(CMD_GET_ALIGNMENT, request, 8))
            (max_size,) = struct.unpack("<Q", conn.call(CMD_GET_MAX_SIZE, request, 8))
            devices.append(RemoteDevice(index, free, total, alignment, max_size))
        return ServerInfo(endpoint, version, devices)
    finally:
        conn.close()


def _believe(endpoint: Endpoint, problem: str | None) -> None:
    if problem:
        raise RpcError(f"{endpoint}: {problem}")


def query_servers(
    endpoints: list[Endpoint], timeout: float = DEFAULT_TIMEOUT, deadline: float | None = None
) -> list[ServerInfo | RpcError]:
    """Each server's answer, or the reason it has none, in the order given. The servers are asked at
    once, so that several slow ones take no longer than one; a server still not done when the
    deadline has passed (a host name whose lookup hangs, say) is given up on."""
    import threading

    limit = QUERY_DEADLINE if deadline is None else deadline
    results: list[ServerInfo | RpcError | None] = [None] * len(endpoints)

    def ask(i: int, endpoint: Endpoint) -> None:
        try:
            results[i] = query_server(endpoint, timeout, limit)
        except RpcError as exc:
            results[i] = exc

    threads = [threading.Thread(target=ask, args=(i, e), daemon=True) for i, e in enumerate(endpoints)]
    for thread in threads:
        thread.start()
    ends_at = time.monotonic() + limit + timeout  # a connect may take `timeout` past the last read
    for thread in threads:
        thread.join(max(ends_at - time.monotonic(), 0))
    return [
        result
        if result is not None
        else RpcError(f"{endpoint}: no answer within {limit:g} s (is the host name right?)")
        for endpoint, result in zip(endpoints, results)
    ]

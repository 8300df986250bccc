"""RPC servers on this machine, and planned vs allocated bytes per device for loads split over them.

    with rpc_servers(2) as endpoints:
        rows = compare_rpc(path, configs, endpoints, n_gpu_layers=99, tensor_split=[1, 1])

    with fake_rpc_server(Claims(devices=100_000)) as endpoint:  # a server that lies
        ...

Each server is `app.rpc.server_process` lending this machine's CPU on 127.0.0.1, in a child
process; llama.cpp then sees RPC0, RPC1 ... beside the local CPU, as it would remote GPUs. The
planner is given the same devices (with the free memory the servers report) and the same split.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.children import child_env
from app.rpc.endpoint import Endpoint
from app.rpc.wire import RpcError, query_server
from planner.hardware import Device, GiB
from tests.support.compare import ConfigRow, compare_devices


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, threads: int = 1) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.rpc.server_process", f"127.0.0.1:{port}", "", str(threads), "CPU"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=child_env(),
    )


def wait_until_serving(endpoint: Endpoint, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            query_server(endpoint, timeout=2)
            return
        except RpcError:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the RPC server on {endpoint} ended: {proc.stderr.read().decode()[-500:]}"
                ) from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def rpc_servers(count: int) -> Iterator[list[Endpoint]]:
    """`count` RPC servers lending this machine's CPU, on free ports of 127.0.0.1."""
    procs: list[subprocess.Popen[bytes]] = []
    endpoints: list[Endpoint] = []
    try:
        for _ in range(count):
            endpoint = Endpoint("127.0.0.1", free_port())
            proc = start_server(endpoint.port)
            procs.append(proc)
            wait_until_serving(endpoint, proc)
            endpoints.append(endpoint)
        yield endpoints
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
            if proc.stderr:
                proc.stderr.close()


def rpc_devices(endpoints: list[Endpoint]) -> list[Device]:
    """The devices llama.cpp gets from these servers, named as it names them (RPC0, RPC1 ...)."""
    devices = []
    for endpoint in endpoints:
        for remote in query_server(endpoint).devices:
            devices.append(
                Device(f"RPC{len(devices)}", "gpu", "rpc", remote.total, remote.free, description=str(endpoint))
            )
    return devices


def _device_of_buffer(name: str, devices: list[Device]) -> str:
    """llama.cpp names an RPC buffer `RPC<index on its server>[HOST:PORT]`; the plan, by device."""
    if not name.startswith("RPC") or "[" not in name:
        return "CPU"
    index, endpoint = name[3:].rstrip("]").split("[", 1)
    on_server = [d for d in devices if d.description == endpoint]
    return on_server[int(index)].name


def compare_rpc(
    path: str | os.PathLike[str],
    configs: list[dict[str, Any]],
    endpoints: list[Endpoint],
    n_gpu_layers: int,
    tensor_split: list[float],
) -> list[ConfigRow]:
    """One row per configuration: every buffer, per device (the CPU and each RPC device)."""
    devices = rpc_devices(endpoints)
    return compare_devices(
        path,
        configs,
        devices,
        lambda name: _device_of_buffer(name, devices),
        n_gpu_layers,
        tensor_split,
        rpc=[str(e) for e in endpoints],
        note={"rpc_servers": len(endpoints)},
    )


@dataclass
class Claims:
    """What a fake RPC server says of itself: how many devices, each one's memory, and how slowly."""

    devices: int = 1
    free: int = 8 * GiB
    total: int = 16 * GiB
    drip: float = 0.0  # seconds between the bytes of every answer (a slow-loris server); 0: all at once


@contextlib.contextmanager
def fake_rpc_server(claims: Claims) -> Iterator[Endpoint]:
    """A server on 127.0.0.1 that speaks the RPC protocol vramchat asks with (app.rpc.wire) and
    claims whatever it is told to: for the servers a user did not write."""
    from app.rpc import wire

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def answer(conn: socket.socket, data: bytes) -> None:
        message = struct.pack("<Q", len(data)) + data
        if not claims.drip:
            conn.sendall(message)
            return
        for i in range(len(message)):
            if stop.wait(claims.drip):
                return
            conn.sendall(message[i : i + 1])

    def recv_exactly(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the client left")
            data += chunk
        return data

    def serve_one(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError, ConnectionError):
            while not stop.is_set():
                command, size = struct.unpack("<BQ", recv_exactly(conn, 9))
                recv_exactly(conn, size)
                if command == wire.CMD_HELLO:
                    answer(conn, bytes([wire.PROTOCOL_MAJOR, 0, 0, 0]) + bytes(wire.CONN_CAPS_SIZE))
                elif command == wire.CMD_DEVICE_COUNT:
                    answer(conn, struct.pack("<I", claims.devices))
                elif command == wire.CMD_GET_DEVICE_MEMORY:
                    answer(conn, struct.pack("<QQ", claims.free, claims.total))
                elif command in (wire.CMD_GET_ALIGNMENT, wire.CMD_GET_MAX_SIZE):
                    answer(conn, struct.pack("<Q", 32 if command == wire.CMD_GET_ALIGNMENT else 2**40))
                else:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield Endpoint("127.0.0.1", listener.getsockname()[1])
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        listener.close()

"""`vramchat serve-rpc`: says what it lends and who connects, stops cleanly on Ctrl+C, refuses clearly."""

from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from app.children import child_env
from app.rpc.addresses import reachable_addresses
from app.rpc.endpoint import Endpoint
from app.rpc.wire import RpcError, query_server
from tests.support.rpc import free_port, wait_until_serving


def _serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app", "serve-rpc", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )


def test_serve_lends_the_cpu_names_each_client_and_stops_on_ctrl_c() -> None:
    port = free_port()
    proc = _serve("--port", str(port))
    try:
        endpoint = Endpoint("127.0.0.1", port)
        wait_until_serving(endpoint, proc)  # one client: the readiness check itself
        info = query_server(endpoint)
        assert len(info.devices) == 1 and info.devices[0].total > 0
        with socket.create_connection(("127.0.0.1", port)) as client:  # a client that stays a moment
            time.sleep(1)
            host, client_port = client.getsockname()
            address = f"{host}:{client_port}"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "lending CPU" in out and f"--rpc 127.0.0.1:{port}" in out
    assert f"{address} connected" in out  # the client's own address
    assert "the client left" in out and "stopped" in out
    with pytest.raises(RpcError, match="refused"):  # the server process is gone with it
        query_server(endpoint, timeout=2)


def _serving_line(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The line where `serve-rpc` says where it serves (read as it is printed, within `timeout`)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:  # up to the serving line only: what follows is the test's to read (communicate)
        for line in proc.stdout or []:
            lines.put(line)
            if "serving on" in line:
                return
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        if line is None:
            raise AssertionError(f"serve-rpc ended without serving: {proc.communicate(timeout=15)[1]}")
        if "serving on" in line:
            return line


def _stop(proc: subprocess.Popen[str]) -> str:
    """Ctrl+C; what it said on stderr."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=15)[1]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_listening_beyond_this_machine_warns_and_names_an_address_clients_can_reach() -> None:
    port = free_port()
    proc = _serve("--host", "0.0.0.0", "--port", str(port))
    line = _serving_line(proc)
    err = _stop(proc)
    assert "WARNING" in err and "no password" in err
    assert "every network interface" in line and f"--rpc 0.0.0.0:{port}" not in line, line
    addresses = reachable_addresses()
    if addresses:  # this machine's own address on its network, which a client can connect to
        assert f"--rpc {addresses[0]}:{port}" in line, line
    else:
        assert "this machine's address on your network" in line, line


def test_a_host_name_is_resolved_and_both_are_said() -> None:
    """ggml-rpc listens on an IP literal only: `--host localhost` used to say it served, then fail."""
    port = free_port()
    proc = _serve("--host", "localhost", "--port", str(port))
    try:
        line = _serving_line(proc)
        assert f"serving on localhost (127.0.0.1:{port})" in line and f"--rpc 127.0.0.1:{port}" in line, line
        assert query_server(Endpoint("127.0.0.1", port), timeout=10).devices  # it serves once it says so
    finally:
        err = _stop(proc)
    assert proc.returncode == 0 and "WARNING" not in err, err


def test_any_127_address_is_this_machine_and_not_warned_about() -> None:
    port = free_port()
    proc = _serve("--host", "127.1", "--port", str(port))
    line = _serving_line(proc)
    err = _stop(proc)
    assert f"serving on 127.1 (127.0.0.1:{port}); use it on this machine" in line, line
    assert "WARNING" not in err, err


def test_a_host_that_names_no_ipv4_address_is_refused_in_words() -> None:
    proc = _serve("--host", "::1", "--port", str(free_port()))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "serving on" not in out
    assert "--host ::1: it names no IPv4 address" in err and "IPv4 addresses only" in err, err


def test_an_unknown_device_and_a_taken_port_are_refused() -> None:
    proc = _serve("--device", "CUDA7", "--port", str(free_port()))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "no device CUDA7" in err and "CPU" in err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        proc = _serve("--port", str(taken.getsockname()[1]))
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "cannot listen" in err


def test_a_closed_terminal_stops_the_server_too() -> None:
    port = free_port()
    proc = _serve("--port", str(port))
    wait_until_serving(Endpoint("127.0.0.1", port), proc)
    proc.send_signal(signal.SIGHUP)
    out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 0 and "stopped" in out
    with pytest.raises(RpcError, match="refused"):
        query_server(Endpoint("127.0.0.1", port), timeout=2)


def test_the_server_process_ends_with_its_parent() -> None:
    """Killed outright (no chance to stop the server), `serve-rpc` still leaves no server behind."""
    port = free_port()
    proc = _serve("--port", str(port))
    wait_until_serving(Endpoint("127.0.0.1", port), proc)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    said = "it answered"
    while time.monotonic() < deadline:
        try:
            query_server(Endpoint("127.0.0.1", port), timeout=1)
        except RpcError as exc:
            said = str(exc)
            if "connection refused" in said:  # nobody listens: gone (a timeout is a server still there, hung)
                return
        time.sleep(0.2)
    raise AssertionError(f"the server outlived serve-rpc: {said}")

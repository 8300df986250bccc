"""`vramchat serve-rpc`: lend this machine's devices to vramchat (or llama.cpp) on another machine.

The server is ggml-rpc's own, run in a child process (`app.rpc.server_process`); this command
says what it lends, who connects and leaves, and stops it cleanly on Ctrl+C. The RPC protocol has
no authentication and lets a client run computations on the lent devices, so the server listens
on 127.0.0.1 unless --host says otherwise, and then it warns.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from app.children import child_env
from app.rpc.addresses import EVERYWHERE, is_loopback, listen_address, reachable_addresses
from app.rpc.endpoint import DEFAULT_PORT, Endpoint

EXIT_FAILED = 1
EXIT_USAGE = 2


class _StopSwitch:
    """Stops the server on the first signal: SIGTERM, then SIGKILL if it is still there 5 s later."""

    GRACE_SECONDS = 5.0

    def __init__(self) -> None:
        self.requested = False
        self._proc: subprocess.Popen[str] | None = None

    def request(self, signum: int, frame: object) -> None:
        if self.requested:  # one stop is enough: the next waits for it
            return
        self.requested = True
        self._end()

    def attach(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc
        if self.requested:
            self._end()

    def _end(self) -> None:
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        killer = threading.Timer(self.GRACE_SECONDS, _kill_if_running, (proc,))
        killer.daemon = True
        killer.start()


def _kill_if_running(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vramchat serve-rpc",
        description="Lend this machine's devices to vramchat or llama.cpp on another machine "
        "(llama.cpp's RPC server). Stop it with Ctrl+C.",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only). The protocol has no "
        "authentication: only give a network address on a network you trust",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="NAME",
        help="a device to lend, as --devices names it (CUDA0, CPU ...); repeat for several "
        "(default: every GPU, or the CPU where there is none)",
    )
    parser.add_argument(
        "--cache",
        action="store_true",
        help="keep large tensors in vramchat's cache folder, so a later load of the same model sends less",
    )
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads (default: all)")
    return parser


def _choose_devices(wanted: list[str]) -> list[tuple[str, str, int, int]]:
    """(name, description, free, total) of the devices to lend. Raises ValueError with the reason."""
    from app.devices.ggml import list_devices

    devices = [d for d in list_devices() if d.type in ("cpu", "gpu", "igpu") and d.backend != "rpc"]
    by_name = {d.name: d for d in devices}
    if wanted:
        unknown = [name for name in wanted if name not in by_name]
        if unknown:
            raise ValueError(f"no device {', '.join(unknown)} here (there are: {', '.join(by_name)})")
        chosen = [by_name[name] for name in wanted]
    else:
        chosen = [d for d in devices if d.is_gpu] or [d for d in devices if d.type == "cpu"]
    return [(d.name, d.description, d.free, d.total) for d in chosen]


def _port_taken(endpoint: Endpoint) -> str | None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((endpoint.host, endpoint.port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _peer(pid: int, port: int) -> str:
    """The address of the client the server (process `pid`) has just accepted on `port`."""
    with contextlib.suppress(Exception):
        import psutil

        for conn in psutil.Process(pid).net_connections(kind="tcp"):
            if conn.status == psutil.CONN_ESTABLISHED and conn.laddr and conn.laddr.port == port and conn.raddr:
                return f"{conn.raddr.ip}:{conn.raddr.port}"
    return "a client"


def _listening(proc: subprocess.Popen[str], port: int, stop: _StopSwitch, timeout: float = 60.0) -> bool:
    """Wait until the server listens on `port` (ggml-rpc says it starts before it binds), without
    connecting to it (a connection would be a client); False if it ended or was stopped first."""
    import psutil

    deadline = time.monotonic() + timeout
    while proc.poll() is None and not stop.requested and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            for conn in psutil.Process(proc.pid).net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                    return True
        time.sleep(0.05)
    return proc.poll() is None and not stop.requested


def _serving_line(host: str, endpoint: Endpoint) -> str:
    """Where the server listens (the name given and the address it stands for), and the --rpc a
    client can use: never 0.0.0.0, which listens everywhere but cannot be connected to."""
    named = str(endpoint) if host == endpoint.host else f"{host} ({endpoint})"
    port = endpoint.port
    if endpoint.host != EVERYWHERE:
        here = " on this machine" if is_loopback(endpoint.host) else ""
        return f"serving on {named}; use it{here} with: vramchat MODEL --rpc {endpoint}   (Ctrl+C stops)"
    reachable = reachable_addresses()
    if reachable:
        use = f"--rpc {reachable[0]}:{port}" + "".join(f" (or {a}:{port})" for a in reachable[1:4])
    else:
        use = (
            f"--rpc ADDRESS:{port}, ADDRESS being this machine's address on your network "
            f"(or its name, {socket.gethostname()}, where your network resolves it)"
        )
    return (
        f"serving on {named}, every network interface; from another machine use it with: vramchat MODEL {use}"
        "   (Ctrl+C stops)"
    )


def _say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')}  {text}", flush=True)


def serve(argv: Sequence[str]) -> int:
    from app.paths import cache_dir
    from app.rpc.client import rpc_available
    from planner.hardware import format_size

    args = build_parser().parse_args(list(argv))
    if not 0 < args.port < 65536:
        print("vramchat serve-rpc: error: --port must be between 1 and 65535", file=sys.stderr)
        return EXIT_USAGE
    try:  # ggml-rpc listens on an IPv4 literal only: a name is resolved here, and both are said
        endpoint = Endpoint(listen_address(args.host), args.port)
    except ValueError as exc:
        print(f"vramchat serve-rpc: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not rpc_available():
        from app.native import reinstall_command

        print(
            "vramchat serve-rpc: error: this llama-cpp-python was built without the RPC backend; rebuild it "
            f"with:\n  {reinstall_command()}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        lent = _choose_devices(args.device)
    except ValueError as exc:
        print(f"vramchat serve-rpc: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    taken = _port_taken(endpoint)
    if taken:
        print(f"vramchat serve-rpc: error: cannot listen on {endpoint}: {taken}", file=sys.stderr)
        return EXIT_FAILED
    if not is_loopback(endpoint.host):
        where = endpoint.host if args.host == endpoint.host else f"{args.host} ({endpoint.host})"
        print(
            f"WARNING: listening on {where}: anyone who can reach port {endpoint.port} can use the lent "
            "devices and see what is computed on them; the protocol has no password or encryption. "
            "Use it only on a network you trust.",
            file=sys.stderr,
            flush=True,
        )
    cache = str(cache_dir() / "rpc-tensors") if args.cache else ""
    if cache:
        os.makedirs(cache, exist_ok=True)
    command = [sys.executable, "-m", "app.rpc.server_process", str(endpoint), cache, str(args.threads)]
    # Ctrl+C, a SIGTERM from a service manager or a closed terminal stops the server cleanly (even
    # where the shell started this command with SIGINT ignored, as it does for background jobs). The
    # handler raises nothing: it ends the server, whose closed output ends the loop below. (Raising
    # KeyboardInterrupt from wherever the signal landed made Python 3.11 exit with SIGINT after the
    # interrupt had been handled, 1 run in 12 under load.)
    stop = _StopSwitch()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal was closed
        signal.signal(sig, stop.request)
    errors: list[str] = []
    proc = subprocess.Popen(
        command + [name for name, *_ in lent],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        text=True,
        start_new_session=True,  # Ctrl+C reaches this command, which then stops the server
    )
    stop.attach(proc)  # a signal that came while it started stops it now
    threading.Thread(target=lambda: errors.extend(proc.stderr or []), daemon=True).start()
    if not stop.requested:
        for name, description, free, total in lent:
            _say(f"lending {name} ({description}): {format_size(free)} free of {format_size(total)}")
    if _listening(proc, endpoint.port, stop) and not stop.requested:
        _say(_serving_line(args.host, endpoint))
        if cache:
            _say(f"keeping large tensors in {cache}")
    for line in proc.stdout or []:
        if stop.requested:
            continue  # what it says while it stops is not news
        if line.startswith("Accepted client connection"):
            _say(f"{_peer(proc.pid, endpoint.port)} connected")
        elif line.startswith("Client connection closed"):
            _say("the client left")
    proc.wait()
    if stop.requested:
        _say("stopped; the lent devices are free again")
        return 0
    detail = "".join(errors).strip().splitlines()
    print(
        f"vramchat serve-rpc: error: the server stopped (exit status {proc.returncode})"
        + (f": {detail[-1]}" if detail else ""),
        file=sys.stderr,
    )
    return EXIT_FAILED

"""Give this process's llama.cpp the devices of RPC servers (what llama.cpp's --rpc does).

`ggml_backend_rpc_add_server` is found through the RPC registry's proc address and its
registry registered with ggml, so that llama.cpp lists the server's devices beside the
local ones (first, as RPC0, RPC1 ... in the order added). Each server is asked first, in
Python and with a timeout (`wire.query_server`), because ggml-rpc's own connect has none.
"""

from __future__ import annotations

import ctypes
import os

from app.native import libraries
from app.rpc.endpoint import Endpoint, configured_endpoints, use_endpoints
from app.rpc.server_process import proc_address, rpc_registry
from app.rpc.wire import RpcError, query_server

_ADD_SERVER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)
_added: list[str] = []  # endpoints given to this process's llama.cpp (it cannot forget one)


def connect_configured(timeout: float = 5.0) -> None:
    """Give this process's llama.cpp the configured servers it does not have yet."""
    add_servers([e for e in configured_endpoints() if str(e) not in _added], timeout)


def rpc_available() -> bool:
    """Whether this llama-cpp-python was built with the RPC backend (it ships libggml-rpc). A look at
    the files, not a load: loading ggml here would start a GPU backend in the app's own process."""
    from app.native import GGMLUnavailable, library_dir, library_names

    try:
        folder = library_dir()
    except GGMLUnavailable:
        return False
    return any(os.path.exists(os.path.join(folder, name)) for name in library_names("ggml-rpc"))


def add_servers(endpoints: list[Endpoint], timeout: float = 5.0) -> None:
    """Connect llama.cpp in this process to each server. Raises RpcError with the reason."""
    if not endpoints:
        return
    ggml, _ = libraries()
    registry = rpc_registry(ggml)
    add = proc_address(ggml, registry, "ggml_backend_rpc_add_server") if registry else None
    if not add:
        from app.native import reinstall_command

        raise RpcError(
            "this llama-cpp-python was built without the RPC backend; rebuild it with:\n  " + reinstall_command()
        )
    ggml.ggml_backend_register.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_register.restype = None
    for endpoint in endpoints:
        query_server(endpoint, timeout)  # reachable, free, and speaking our protocol: or a clear error
        server_registry = _ADD_SERVER(add)(str(endpoint).encode())
        if not server_registry:
            raise RpcError(f"{endpoint}: the server lends no devices")
        ggml.ggml_backend_register(server_registry)
        _added.append(str(endpoint))


def drop_unanswering(timeout: float = 3.0) -> list[Endpoint]:
    """Leave out the configured servers that no longer answer (for this process and the ones it
    starts from now on); the ones left out, in order."""
    kept, lost = [], []
    for endpoint in configured_endpoints():
        try:
            query_server(endpoint, timeout)
            kept.append(endpoint)
        except RpcError:
            lost.append(endpoint)
    if lost:
        use_endpoints(kept)
    return lost

"""Give this process's llama.cpp the devices of RPC servers (what llama.cpp's --rpc does).

`ggml_backend_rpc_add_server` is found through the RPC registry's proc address and its
registry registered with ggml, so that llama.cpp lists the server's devices beside the
local ones (first, as RPC0, RPC1 ... in the order added). Each server is asked first, in
Python and with a timeout (`wire.query_server`), because ggml-rpc's own connect has none.
"""

from __future__ import annotations

import ctypes

from app.devices.ggml import _libs
from app.rpc.endpoint import Endpoint
from app.rpc.server_process import proc_address, rpc_registry
from app.rpc.wire import RpcError, query_server

_ADD_SERVER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)


def rpc_available() -> bool:
    """Whether this llama-cpp-python was built with the RPC backend."""
    try:
        ggml, _ = _libs()
    except Exception:
        return False
    return bool(rpc_registry(ggml))


def add_servers(endpoints: list[Endpoint], timeout: float = 5.0) -> None:
    """Connect llama.cpp in this process to each server. Raises RpcError with the reason."""
    if not endpoints:
        return
    ggml, _ = _libs()
    registry = rpc_registry(ggml)
    add = proc_address(ggml, registry, "ggml_backend_rpc_add_server") if registry else None
    if not add:
        raise RpcError(
            "this llama-cpp-python was built without the RPC backend: reinstall it with "
            'CMAKE_ARGS="-DGGML_RPC=on" (see the README)'
        )
    ggml.ggml_backend_register.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_register.restype = None
    for endpoint in endpoints:
        query_server(endpoint, timeout)  # reachable, free, and speaking our protocol: or a clear error
        server_registry = _ADD_SERVER(add)(str(endpoint).encode())
        if not server_registry:
            raise RpcError(f"{endpoint}: the server lends no devices")
        ggml.ggml_backend_register(server_registry)

"""The RPC server itself: `python -m app.rpc.server_process ENDPOINT CACHE_DIR THREADS DEVICE...`.

Runs ggml-rpc's `ggml_backend_rpc_start_server` (found through the RPC registry's proc address,
as llama.cpp's rpc-server does) on the named devices of this llama-cpp-python build. It never
returns while it serves; it prints one line per client that connects or leaves, which
`vramchat serve-rpc` (its parent) reads. A separate process, so that a crash in a backend ends
the server, never the command that shows it.
"""

from __future__ import annotations

import ctypes
import os
import sys

from app.children import die_with_parent
from app.native import IN_PROCESS_ENV, GGMLUnavailable, libraries

_START_SERVER = ctypes.CFUNCTYPE(
    None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)
)


def rpc_registry(ggml: ctypes.CDLL) -> int | None:
    """The RPC backend's registry, or None where llama.cpp was built without -DGGML_RPC=on."""
    ggml.ggml_backend_reg_by_name.restype = ctypes.c_void_p
    ggml.ggml_backend_reg_by_name.argtypes = [ctypes.c_char_p]
    return ggml.ggml_backend_reg_by_name(b"RPC")


def proc_address(ggml: ctypes.CDLL, registry: int, name: str) -> int | None:
    ggml.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    ggml.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return ggml.ggml_backend_reg_get_proc_address(registry, name.encode())


def main(argv: list[str]) -> int:
    endpoint, cache_dir, threads, *names = argv
    die_with_parent()  # never an orphan server lending devices after `serve-rpc` (or a test) ended
    os.environ[IN_PROCESS_ENV] = "1"
    try:
        ggml, _ = libraries()
    except GGMLUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    registry = rpc_registry(ggml)
    start = proc_address(ggml, registry, "ggml_backend_rpc_start_server") if registry else None
    if not start:
        print("error: this llama-cpp-python was built without the RPC backend (-DGGML_RPC=on)", file=sys.stderr)
        return 2
    ggml.ggml_backend_dev_by_name.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_by_name.argtypes = [ctypes.c_char_p]
    devices = (ctypes.c_void_p * len(names))()
    for i, name in enumerate(names):
        devices[i] = ggml.ggml_backend_dev_by_name(name.encode())
        if not devices[i]:
            print(f"error: llama.cpp has no device {name}", file=sys.stderr)
            return 2
    sys.stdout.flush()
    _START_SERVER(start)(
        endpoint.encode(),
        cache_dir.encode() or None,
        int(threads),
        len(names),
        ctypes.cast(devices, ctypes.POINTER(ctypes.c_void_p)),
    )
    # ggml-rpc returns only when it could not listen (it said why on stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

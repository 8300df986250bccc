"""What a device's buffers allow, asked of ggml itself (not assumed from the backend's name).

The planner needs four facts of each GPU, and ggml's device and buffer-type API answers each:
- the device buffer type's alignment (`ggml_backend_buft_get_alignment`: each tensor's offset is
  rounded up to it; Vulkan's is the device's minStorageBufferOffsetAlignment),
- its largest buffer (`ggml_backend_buft_get_max_size`: a larger allocation is cut into several),
- the host buffer type llama.cpp pins host weights, the output and the CPU's compute buffer in
  (`ggml_backend_dev_host_buffer_type`: CUDA_Host, Vulkan_Host; none for RPC), with its alignment,
- the largest tensor an op on the device may touch. ggml-vulkan's supports_op refuses any op with
  a source or result over the device's maxBufferSize, or over maxStorageBufferRange where shaders
  index in 32 bits (ggml-vulkan.cpp, ggml_backend_vk_device_supports_op: tensor_size_supported);
  llama.cpp then keeps such a weight in host memory and runs such an op on the CPU. It is found by
  asking supports_op about a SCALE of an F32 tensor (which every GPU backend runs) of growing size.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

GGML_TYPE_F32 = 0
SEARCH_CEILING = 1 << 46  # bytes: a backend that takes a 64 TiB tensor has no limit worth planning for


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


@dataclass(frozen=True)
class BufferLimits:
    alignment: int
    max_size: int
    host_buffer: str  # the host (pinned) buffer type's name, '' when the device has none
    host_alignment: int
    max_tensor: int | None  # bytes; None: no limit below SEARCH_CEILING


def _declare(ggml: ctypes.CDLL) -> None:
    vp, size = ctypes.c_void_p, ctypes.c_size_t
    for name, restype, argtypes in (
        ("ggml_backend_dev_buffer_type", vp, [vp]),
        ("ggml_backend_dev_host_buffer_type", vp, [vp]),
        ("ggml_backend_buft_name", ctypes.c_char_p, [vp]),
        ("ggml_backend_buft_get_alignment", size, [vp]),
        ("ggml_backend_buft_get_max_size", size, [vp]),
        ("ggml_backend_dev_supports_op", ctypes.c_bool, [vp, vp]),
        ("ggml_init", vp, [_InitParams]),
        ("ggml_free", None, [vp]),
        ("ggml_new_tensor_1d", vp, [vp, ctypes.c_int, ctypes.c_int64]),
        ("ggml_scale", vp, [vp, vp, ctypes.c_float]),
    ):
        fn = getattr(ggml, name)
        fn.restype, fn.argtypes = restype, argtypes


def read_limits(ggml: ctypes.CDLL, dev: int) -> BufferLimits | None:
    """The device's buffer limits, or None where this libggml lacks a function they need."""
    try:
        _declare(ggml)
    except AttributeError:
        return None
    buft = ggml.ggml_backend_dev_buffer_type(dev)
    if not buft:
        return None
    host = ggml.ggml_backend_dev_host_buffer_type(dev)
    return BufferLimits(
        alignment=int(ggml.ggml_backend_buft_get_alignment(buft)),
        max_size=int(ggml.ggml_backend_buft_get_max_size(buft)),
        host_buffer=(ggml.ggml_backend_buft_name(host) or b"").decode(errors="replace") if host else "",
        host_alignment=int(ggml.ggml_backend_buft_get_alignment(host)) if host else 0,
        max_tensor=_largest_tensor(ggml, dev),
    )


def _largest_tensor(ggml: ctypes.CDLL, dev: int) -> int | None:
    """The largest F32 tensor (in bytes, a multiple of 4) whose SCALE the device supports."""
    ctx = ggml.ggml_init(_InitParams(1 << 20, None, True))
    if not ctx:
        return None
    try:

        def supported(n_bytes: int) -> bool:
            a = ggml.ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_bytes // 4)
            return bool(ggml.ggml_backend_dev_supports_op(dev, ggml.ggml_scale(ctx, a, 1.0)))

        if supported(SEARCH_CEILING):
            return None
        if not supported(4):
            return 0
        low, high = 4, SEARCH_CEILING  # supported(low), not supported(high)
        while high - low > 4:
            mid = (low + high) // 8 * 4
            low, high = (mid, high) if supported(mid) else (low, mid)
        return low
    finally:
        ggml.ggml_free(ctx)

"""Which device a buffer llama.cpp names lives on: the one reading of its buffer names that the
engine's measurements, the learned overheads, the live plot and the CLI's report all share."""

from __future__ import annotations

from planner.hardware import HOST


def device_of(buffer: str, gpu_names: list[str], rpc_buffers: dict[str, str] | None = None) -> str:
    """The device a buffer llama.cpp names lives on: 'CUDA0' and 'MTL0_Mapped' on their GPU,
    'RPC0[host:port]' on its RPC device (`planner.rpc.rpc_buffer_names`); 'CPU_Mapped',
    'CPU_REPACK', 'CUDA_Host' (pinned) and the like in host memory."""
    if buffer in gpu_names:
        return buffer
    if rpc_buffers and buffer in rpc_buffers:
        return rpc_buffers[buffer]
    base = buffer.split("_", 1)[0]
    return base if base in gpu_names else HOST

"""`llama_cpp.Llama` loaded as vramchat's engine loads a model: the CPU's extra buffer types on or off by
the same rule (planner.weights.uses_cpu_extra_buffers: off on CPUs with AMX, whose kernels in this build
crash the demo's first decode with a segfault).

`Llama` has no parameter for `use_extra_bufts`: it takes llama.cpp's default model parameters and sets
the ones it knows, so the default is answered with the engine's choice while it loads.
"""

from __future__ import annotations

from typing import Any


def engine_extra_buffers(cpu_extra_buffers: bool | None = None) -> bool:
    """Whether the engine would load host weights into the CPU's extra buffer types on this CPU."""
    from app.devices.ggml import cpu_features
    from planner.weights import uses_cpu_extra_buffers

    return uses_cpu_extra_buffers(cpu_extra_buffers, cpu_features())


def load_llama(path: str, extra_buffers: bool, **kwargs: Any) -> Any:
    """`llama_cpp.Llama(path, **kwargs)` with `use_extra_bufts` set to `extra_buffers`."""
    import llama_cpp
    from llama_cpp import llama_cpp as native

    defaults = native.llama_model_default_params

    def engine_defaults() -> Any:
        params = defaults()
        params.use_extra_bufts = extra_buffers
        return params

    native.llama_model_default_params = engine_defaults
    try:
        return llama_cpp.Llama(path, **kwargs)
    finally:
        native.llama_model_default_params = defaults

"""bench/engine_speed.py's direct `llama_cpp.Llama` loads as the engine does: without the CPU's extra
buffer types on an AMX CPU (their kernels crash the demo's first decode in this build)."""

from __future__ import annotations

from pathlib import Path

import pytest

import app.devices.ggml
from bench.direct_llama import engine_extra_buffers, load_llama


def test_the_direct_llama_takes_the_engine_s_choice_of_extra_buffer_types(
    zoo: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    model = str(zoo["qwen2-q4_0"])  # q4_0 weights: what CPU_REPACK takes where the CPU has a repacked kernel
    off = load_llama(model, False, n_ctx=256, n_gpu_layers=0, verbose=True)
    assert off.model_params.use_extra_bufts is False
    assert "CPU_REPACK model buffer" not in capfd.readouterr().err
    on = load_llama(model, True, n_ctx=256, n_gpu_layers=0, verbose=True)
    assert on.model_params.use_extra_bufts is True
    # the default is llama.cpp's own again once loaded
    import llama_cpp

    assert llama_cpp.llama_model_default_params().use_extra_bufts is True
    del on, off


def test_an_amx_cpu_loads_the_direct_llama_without_extra_buffer_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.devices.ggml, "cpu_features", lambda: frozenset({"avx2", "avx512", "amx_int8"}))
    assert engine_extra_buffers() is False and engine_extra_buffers(True) is True
    monkeypatch.setattr(app.devices.ggml, "cpu_features", lambda: frozenset({"avx2"}))
    assert engine_extra_buffers() is True and engine_extra_buffers(False) is False

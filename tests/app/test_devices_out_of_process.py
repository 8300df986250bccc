"""A GPU build keeps llama.cpp's backends out of the app's process: devices are asked in a child.

A CUDA context made in the UI process would hold hundreds of MiB of VRAM the model could use. The
machine running the tests may have no GPU build, so the test makes llama-cpp-python's library folder
look like one (a copy of the real folder plus a `libggml-cuda` file) and checks that the devices
still come back, from another process, and that this process never mapped that folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.devices import ggml


@pytest.fixture()
def gpu_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    real = Path(ggml.library_dir())
    folder = tmp_path / "gpu-build-lib"
    folder.mkdir()
    for item in real.iterdir():
        (folder / item.name).symlink_to(item)
    (folder / ggml.library_names("ggml-cuda")[0]).write_bytes(b"")  # never loaded by the app
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(folder))
    monkeypatch.delenv(ggml.IN_PROCESS_ENV, raising=False)
    return folder


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_a_gpu_build_is_probed_in_a_child_process(gpu_build: Path) -> None:
    assert ggml.gpu_backend_libraries() == ["ggml-cuda"] and ggml.probe_out_of_process()
    devices = ggml.list_devices()
    assert any(d.type == "cpu" for d in devices) and all(d.total > 0 for d in devices if d.type == "cpu")
    assert ggml.cpu_features() == ggml._probe_child()[1]
    assert str(gpu_build) not in Path("/proc/self/maps").read_text()


def test_a_cpu_build_is_probed_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ggml.IN_PROCESS_ENV, raising=False)
    if ggml.gpu_backend_libraries():
        pytest.skip("this llama-cpp-python has a GPU backend")
    assert not ggml.probe_out_of_process()


def test_the_engine_process_loads_backends_itself(monkeypatch: pytest.MonkeyPatch, gpu_build: Path) -> None:
    monkeypatch.setenv(ggml.IN_PROCESS_ENV, "1")
    assert not ggml.probe_out_of_process()

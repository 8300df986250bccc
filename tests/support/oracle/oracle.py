"""Run real llama.cpp loads and return the exact size of every buffer it allocated.

    from tests.support.oracle.oracle import measure
    model_buffers, rows = measure("model.gguf", [{"n_ctx": 4096, "flash_attn": True}])

Each configuration in one call shares one model load; every call is a fresh
process with the size shim preloaded (it needs a C compiler the first time).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


class OracleUnavailable(RuntimeError):
    """The oracle cannot run here (no C compiler, or llama-cpp-python missing)."""


class OracleAborted(RuntimeError):
    """llama.cpp's process ended before it answered every configuration (a GGML_ASSERT, a crash): the
    configurations it did answer, and how it ended. A test that expects the abort catches this; to every
    other caller a short answer is an error, never fewer rows to check."""

    def __init__(self, model: str, rows: list[dict[str, Any]], asked: int, returncode: int, stderr: str) -> None:
        self.rows = rows
        self.asked = asked
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(
            f"llama.cpp stopped after {len(rows)} of {asked} configurations of {model} (exit {returncode}): "
            f"{stderr[-2000:]}"
        )


@functools.lru_cache(maxsize=1)
def shim_path() -> str:
    """Build the size shim once per process, in a private temporary folder."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise OracleUnavailable("no C compiler to build the buffer size shim")
    out_dir = Path(tempfile.mkdtemp(prefix="vramchat-oracle-"))
    out = out_dir / "size_shim.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(out), str(HERE / "size_shim.c"), "-ldl"],
        check=True,
        capture_output=True,
    )
    return str(out)


def measure(
    model: str | os.PathLike[str],
    configs: list[dict[str, Any]],
    n_gpu_layers: int = 0,
    use_mmap: bool = True,
    timeout: float = 600,
    cpu_extra_buffers: bool | None = None,
    rpc: list[str] | None = None,
    tensor_split: list[float] | None = None,
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Model buffers and, per configuration, the KV, RS, output and compute buffers.

    `cpu_extra_buffers` None loads as the app does on this CPU (planner.weights.uses_cpu_extra_buffers).
    `rpc` adds the devices of these RPC servers (HOST:PORT), split as `tensor_split` says. One row per
    configuration, always: a process that ends before answering them all raises OracleAborted."""
    from app.devices import ggml
    from planner.weights import uses_cpu_extra_buffers

    shim = shim_path()
    extra = uses_cpu_extra_buffers(cpu_extra_buffers, ggml.cpu_features())
    env = dict(os.environ)
    env["LD_PRELOAD"] = shim + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    spec = {
        "shim": shim,
        "model": os.fspath(model),
        "n_gpu_layers": n_gpu_layers,
        "use_mmap": use_mmap,
        "use_extra_bufts": extra,
        "rpc": rpc or [],
        "tensor_split": tensor_split or [],
    }
    stdin = "\n".join(json.dumps(x) for x in [spec, *configs]) + "\n"
    proc = subprocess.run(
        [sys.executable, str(HERE / "measure.py")],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if lines and "fatal" in lines[0]:
        raise RuntimeError(f"llama.cpp could not load {model}: {lines[0]}")
    rows = lines[1:]
    if not lines or len(rows) != len(configs) or proc.returncode != 0:
        raise OracleAborted(os.fspath(model), rows, len(configs), proc.returncode, proc.stderr)
    return lines[0]["model"], rows


def measure_projector(
    projector: str | os.PathLike[str],
    configs: list[dict[str, Any]],
    text_model: str | os.PathLike[str] | None = None,
    timeout: float = 300,
) -> list[dict[str, Any]]:
    """libmtmd loads `projector` once per configuration (CPU): the bytes of clip's weight buffer and of
    its compute buffer per scheduler backend after the warmup, as `measure.projector_main` reports them.

    A configuration: {"flash_attn": bool or None (auto), "image_max_tokens": N, "encode": [nx, ny]};
    encoding an image needs `text_model` (mtmd tokenizes the text around the image)."""
    shim = shim_path()
    env = dict(os.environ)
    env["LD_PRELOAD"] = shim + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    text = os.fspath(text_model) if text_model else None
    spec = {"shim": shim, "projector": os.fspath(projector), "text_model": text}
    stdin = "\n".join(json.dumps(x) for x in [spec, *configs]) + "\n"
    proc = subprocess.run(
        [sys.executable, str(HERE / "measure.py")],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines or "fatal" in lines[0]:
        raise RuntimeError(f"libmtmd could not start for {projector}: {lines[0] if lines else proc.stderr[-2000:]}")
    rows = lines[1:]
    if len(rows) < len(configs):  # a native abort ends the process: name the configuration it died on
        raise RuntimeError(
            f"libmtmd stopped at configuration {len(rows)} of {projector} (exit {proc.returncode}): "
            f"{proc.stderr[-2000:]}"
        )
    return rows

"""A load past the device's memory fails for real and the app recovers with a smaller plan, on Vulkan0.

lavapipe does not enforce the 2 GiB heap it reports: its device memory is the engine process's own. With
VRAMCHAT_ENGINE_DATA_LIMIT_MIB (app/engine/data_limit.py: RLIMIT_DATA) every engine process's load is capped
between what the planner's smaller plan takes and what the full offload asks for, so the full offload's
Vulkan0 weights buffer fails in the driver (ggml_vulkan: "Device memory allocation of size ... failed",
vk::Device::allocateMemory: ErrorOutOfDeviceMemory) as on a full GPU, and the smaller plan loads and
answers. The cap is measured on this machine for that smaller plan's load (the threads and buffers a machine
with more cores adds are counted); it stands only while llama.cpp allocates, so a reply's shader compiles
(host memory on a GPU, more or less of it by machine and by the shader cache's state) are never under it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from app.engine.data_limit import ENV, MiB
from tests.support.tiny import TinySpec, write_tiny_model

if TYPE_CHECKING:
    from app.devices import DeviceReport
    from planner.fit import FitResult
    from planner.memory import MemoryPlan
    from planner.model import ModelAnatomy

# 8 layers of 44 MiB (F16, a 6,144-wide feed-forward): 353 MiB of weights on the device at full offload,
# where the planner's retry (at least 256 MiB less on the device that refused) keeps 2 layers and the output
WIDE = TinySpec("llama", n_layer=8, n_embd=1024, n_head=8, n_head_kv=8, n_ff=6144, name="wide-llama")
CTX = 512
MARGIN = 48 * MiB  # above what the smaller plan was seen to take
VRAMCHAT = str(Path(sys.executable).with_name("vramchat"))
PROMPT = "Hi"  # a short prompt: lavapipe reads a few tokens a second on this tiny model's CPU layers


@dataclass(frozen=True)
class Heap:
    model: Path
    cap_mib: int  # the engine process's data cap
    first_layers: int  # on Vulkan0 in the plan that cannot load under the cap
    smaller_layers: int  # in the planner's next plan after Vulkan0 refused


def _data(pid: int) -> int:
    """A process's data (what RLIMIT_DATA counts), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmData for {pid}")


def _plans(model: Path) -> tuple[DeviceReport, ModelAnatomy, FitResult, MemoryPlan]:
    """The devices, the model, the plan asked for (all on Vulkan0 at a 512-token context) and the planner's
    next plan once Vulkan0 refused it, as the session makes it."""
    from app.devices import probe_devices
    from planner.anatomy import load_anatomy
    from planner.fit import Wishes, solve
    from planner.gguf import read_gguf
    from planner.retry import safer_plan

    report = probe_devices()
    anatomy = load_anatomy(read_gguf(str(model)))
    fit = solve(anatomy, report.gpus, report.host, Wishes(n_ctx=CTX, flash_attn="on"))
    smaller = safer_plan(anatomy, fit.plan, report.gpus, report.host, failed_devices={"Vulkan0"})
    assert smaller is not None
    return report, anatomy, fit, smaller.plan


@pytest.fixture(scope="module")
def heap(tmp_path_factory: pytest.TempPathFactory) -> Heap:
    model = write_tiny_model(tmp_path_factory.mktemp("heap") / "wide.gguf", WIDE)
    with pytest.MonkeyPatch.context() as patch:  # a home of its own: no load learned elsewhere counts
        patch.setenv("VRAMCHAT_HOME", str(tmp_path_factory.mktemp("heap-home")))
        patch.delenv(ENV, raising=False)
        return _measured(model)


def _measured(model: Path) -> Heap:
    """The cap: what the engine holds once the planner's smaller plan is loaded, and a margin."""
    from app.engine.process import EngineProcess

    _, _, fit, smaller = _plans(model)
    engine = EngineProcess()
    try:
        engine.dry_run(model, smaller.config)
        assert engine.pid is not None
        before_load = _data(engine.pid)  # the engine with llama.cpp and the Vulkan device up
        engine.load(model, smaller.config)
        assert engine.pid is not None
        cap = _data(engine.pid) + MARGIN
    finally:
        engine.close()
    full_weights = sum(b.bytes for b in fit.plan.buffers if b.device == "Vulkan0" and b.kind == "weights")
    # the full offload's weights buffer alone takes the engine past the cap, by the margin at least
    assert before_load + full_weights > cap + MARGIN, (before_load, full_weights, cap)
    return Heap(model, -(-cap // MiB), fit.plan.layers_on_gpu, smaller.layers_on_gpu)


@pytest.mark.parametrize("read_again", [False, True], ids=["as the command line", "devices read again, as the chat"])
def test_a_full_offload_past_the_heap_fails_for_real_and_a_smaller_plan_answers(
    heap: Heap, monkeypatch: pytest.MonkeyPatch, read_again: bool
) -> None:
    """The chat reads the devices again before it retries, and the failure has raised what Vulkan0 is known
    to hold beside the buffers: the retry counts that once (it dropped the chat to 0 layers), so both ways
    load the same smaller plan."""
    from app.conversation.recovery import retry_words
    from app.devices import probe_devices
    from app.engine.types import GenerationParams
    from app.session import ModelSession
    from planner.retry import Retry

    report, anatomy, fit, _ = _plans(heap.model)
    assert fit.plan.layers_on_gpu == heap.first_layers == WIDE.n_layer + 1  # the whole model on Vulkan0
    monkeypatch.setenv(ENV, str(heap.cap_mib))
    retries: list[tuple[Retry | None, str]] = []
    session = ModelSession(elastic=False)
    try:
        loaded = session.load(
            str(heap.model),
            anatomy,
            fit,
            report,
            on_retry=lambda r, why: retries.append((r, why)),
            reprobe=probe_devices if read_again else None,
        )
        ((retry, why),) = retries
        assert retry is not None
        # the device refused the full offload's weights: llama.cpp's own words, read back by the app
        assert "failed to allocate Vulkan0 buffer of size" in why and "unable to allocate Vulkan0 buffer" in why
        layers = f"GPU layers {heap.first_layers} → {heap.smaller_layers} of {heap.first_layers}"
        assert retry.changes[0] == layers and loaded.changes == retry.changes
        # what the user reads (the chat's notice, the command line's stderr)
        words = retry_words(why, retry.changes)
        assert words.startswith("could not load the model: Vulkan0 could not allocate ")
        assert f"\nTrying a smaller plan: {layers}; Vulkan0 " in words
        # the smaller plan is what loaded: fewer layers on Vulkan0, and their weights there
        assert loaded.plan.layers_on_gpu == heap.smaller_layers < heap.first_layers
        on_device = loaded.report.measurements.model.get("Vulkan0", 0)
        planned = sum(b.bytes for b in loaded.plan.buffers if b.device == "Vulkan0" and b.kind == "weights")
        assert on_device > 0 and abs(on_device - planned) <= 1 * MiB, (on_device, planned)
        engine = session.engine
        answer = "".join(engine.generate(engine.tokenize(PROMPT), GenerationParams(max_tokens=4, temperature=0.0)))
        assert answer and engine.last_stats.generated_tokens > 0
    finally:
        session.close()


def test_vramchat_says_the_failure_then_answers_with_the_smaller_plan(heap: Heap) -> None:
    env = dict(os.environ, **{ENV: str(heap.cap_mib)})
    args = [str(heap.model), "-p", PROMPT, "-n", "4", "--ctx", str(CTX), "--elastic", "off", "--json"]
    proc = subprocess.run(
        [VRAMCHAT, *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    layers = f"GPU layers {heap.first_layers} → {heap.smaller_layers} of {heap.first_layers}"
    said = [line for line in proc.stderr.splitlines() if line.startswith("vramchat: ")]
    assert said[0].startswith("vramchat: not enough memory: could not load the model: Vulkan0 could not allocate ")
    assert f". Trying a smaller plan: {layers}; Vulkan0 " in said[0]
    assert said[1].startswith(f"vramchat: loaded with a smaller plan than the one chosen: {layers}")
    answer = json.loads(proc.stdout)
    assert answer["config"]["n_gpu_layers"] == heap.smaller_layers and answer["tokens"] > 0

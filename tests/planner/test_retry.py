"""After a failed load: the next plan asks strictly less of the device that refused, and says what changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.anatomy import load_anatomy
from planner.fit import Wishes, solve
from planner.gguf import read_gguf
from planner.hardware import GiB, Host
from planner.retry import MAX_RETRIES, safer_plan
from tests.support.fake_gpus import simulated_gpus
from tests.support.synthetic import llama_like

HOST = Host(32 * GiB, 28 * GiB, frozenset({"avx2"}))


@pytest.fixture(scope="module")
def llama8b():
    return llama_like()


def test_gpu_failure_drops_layers_or_context(llama8b) -> None:
    gpus = simulated_gpus([8 * GiB])
    first = solve(llama8b, gpus, HOST).plan
    retry = safer_plan(llama8b, first, gpus, HOST, failed_devices={gpus[0].name})
    assert retry is not None and retry.plan.fits
    assert retry.plan.gpus[0].planned < first.gpus[0].planned
    # the solver's order: it keeps the model on the GPU as long as it can
    assert retry.plan.layers_on_gpu <= first.layers_on_gpu
    assert retry.plan.resolved.n_ctx <= first.resolved.n_ctx
    assert retry.changes and any("GPU layers" in c or "context" in c for c in retry.changes)
    assert "CUDA0" in retry.describe() or "GPU0" in retry.describe() or gpus[0].name in retry.describe()


def test_retries_end(llama8b) -> None:
    """Each step asks less of the device that refused; a chain of retries stops instead of looping."""
    gpus = simulated_gpus([6 * GiB])
    plan = solve(llama8b, gpus, HOST).plan
    steps = 0
    while steps < 50:
        steps += 1
        on_gpu = plan.gpus[0].planned if plan.layers_on_gpu else 0
        retry = safer_plan(llama8b, plan, gpus, HOST)
        if retry is None:
            break
        if on_gpu:
            assert retry.plan.gpus[0].planned < on_gpu
        else:  # everything on the host: the host's share shrinks, the GPU gets nothing back
            assert retry.plan.host.planned < plan.host.planned
            assert retry.plan.layers_on_gpu == 0
        plan = retry.plan
    assert steps < 50, "retries never ended"
    assert steps > MAX_RETRIES  # there is room for the app's retries before nothing is left
    assert plan.resolved.n_ctx < 1024


def test_host_failure_halves_context(gemma_path: Path) -> None:
    gemma = load_anatomy(read_gguf(gemma_path))
    first = solve(gemma, [], HOST, Wishes(n_ctx=8192)).plan
    assert first.verdict == "cpu_only"
    retry = safer_plan(gemma, first, [], HOST, Wishes(n_ctx=8192))
    assert retry is not None
    assert retry.plan.resolved.n_ctx == first.resolved.n_ctx // 2
    assert retry.plan.host.planned < first.host.planned
    assert retry.changes[0] == "context 8,192 → 4,096 tokens"


def test_nothing_smaller_at_the_floor(gemma_path: Path) -> None:
    gemma = load_anatomy(read_gguf(gemma_path))
    first = solve(gemma, [], HOST, Wishes(n_ctx=512)).plan
    assert safer_plan(gemma, first, [], HOST) is None


def test_only_the_blamed_gpu_shrinks(llama8b) -> None:
    gpus = simulated_gpus([6 * GiB, 6 * GiB])
    first = solve(llama8b, gpus, HOST).plan
    assert all(d.layers for d in first.gpus)
    retry = safer_plan(llama8b, first, gpus, HOST, failed_devices={gpus[1].name})
    assert retry is not None
    assert retry.plan.gpus[1].planned < first.gpus[1].planned


def test_what_the_failure_taught_the_device_is_counted_once(llama8b) -> None:
    """The chat reads the devices again after a failed load, and the failure raised what the GPU is known to
    hold beside the buffers: the retry must not take that rise out of its shrunk budget a second time (it
    dropped a chat on lavapipe to 0 GPU layers where the command line kept 3)."""
    import dataclasses

    from planner.hardware import LearnedOverhead

    gpus = simulated_gpus([8 * GiB])
    first = solve(llama8b, gpus, HOST).plan
    as_before = safer_plan(llama8b, first, gpus, HOST, failed_devices={gpus[0].name})
    taught = [dataclasses.replace(gpus[0], learned=LearnedOverhead(context=2 * GiB, raised_by="a failed load"))]
    read_again = safer_plan(llama8b, first, taught, HOST, failed_devices={gpus[0].name})
    assert as_before is not None and read_again is not None
    assert read_again.plan.gpus[0].overhead > first.gpus[0].overhead  # the new plan counts what was taught
    assert read_again.plan.layers_on_gpu == as_before.plan.layers_on_gpu > 0
    # and says that the buffers shrank, beside what the device holds more
    assert any(
        c.startswith(f"{gpus[0].name} buffers ") and "more beside them than planned" in c for c in read_again.changes
    )

"""The recovery policy after a failed reply: one decision for the chat screen and the command line."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from app.conversation.outcome import CRASHED, FAILED, OK, OUT_OF_MEMORY, ReplyOutcome
from app.conversation.recovery import SAME, SMALLER, WITHOUT_EXTRA_BUFFERS, recovery_for, retry_words
from app.engine.crash import EngineCrashed, EngineExit
from app.engine.types import EngineError, GenerationStats
from app.errors import describe
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.errors import ConfigError, GGUFError, PlannerError
from planner.gguf import read_gguf
from planner.hardware import GiB, Host
from planner.memory import MemoryPlan, plan_memory


@pytest.fixture
def plan(zoo: dict[str, Path]) -> MemoryPlan:
    model = load_anatomy(read_gguf(zoo["llama-f16"]))
    return plan_memory(model, LoadConfig(n_ctx=1024), [], Host(16 * GiB, 16 * GiB))


def _crash(*lines: str, sig: int = signal.SIGSEGV, oom: bool = False, extra: tuple[str, ...] = ()) -> ReplyOutcome:
    crash = EngineCrashed(EngineExit(-sig, "decode", tuple(lines), oom_killed=oom, extra_buffers=extra))
    return ReplyOutcome(CRASHED, "partial", GenerationStats(), str(crash), crash)


def test_a_reply_that_ended_well_or_failed_plainly_needs_no_reload(plan: MemoryPlan) -> None:
    assert recovery_for(ReplyOutcome(OK, "Paris.", GenerationStats()), plan) is None
    failed = ReplyOutcome(FAILED, "", GenerationStats(), "the template failed")
    assert recovery_for(failed, plan) is None


def test_a_decode_out_of_memory_reloads_smaller_without_asking(plan: MemoryPlan) -> None:
    error = EngineError("llama.cpp could not decode (out of memory): ggml_gallocr_reserve_n: failed", [], -2)
    recovery = recovery_for(ReplyOutcome(OUT_OF_MEMORY, "half", GenerationStats(), str(error), error), plan)
    assert recovery is not None and recovery.action == SMALLER and not recovery.ask_user
    assert "What was written is kept" in recovery.message and recovery.error is error


def test_a_crash_is_reloaded_as_its_evidence_says(plan: MemoryPlan) -> None:
    killed = recovery_for(_crash(sig=signal.SIGKILL, oom=True), plan)
    assert killed is not None and killed.action == SMALLER and "out-of-memory killer" in killed.message
    repack = recovery_for(_crash("ggml-cpu/repack.cpp:123: GGML_ASSERT(x) failed", extra=("CPU_REPACK",)), plan)
    assert repack is not None and repack.action == WITHOUT_EXTRA_BUFFERS and "CPU_REPACK" in repack.message
    # the same crash on a plan already without extra buffer types: nothing points to a cure, ask
    off = plan.config.with_(cpu_extra_buffers=False)
    plain = plan_memory(plan.model, off, [], Host(16 * GiB, 16 * GiB))
    asked = recovery_for(_crash("ggml-cpu/repack.cpp:123: GGML_ASSERT(x) failed", extra=("CPU_REPACK",)), plain)
    assert asked is not None and asked.action == SAME and asked.ask_user


def test_planner_errors_reaching_a_worker_are_told_in_words_not_as_a_bug() -> None:
    title, text = describe(GGUFError("/m/x.gguf", "truncated: 12 bytes"))
    assert title == "The model file cannot be read" and text == "/m/x.gguf: truncated: 12 bytes"
    assert "report" not in describe(ConfigError("quantized V needs flash attention"))[0]
    assert describe(PlannerError("odd"))[0] == "The model cannot be planned"
    assert "please report this" in describe(RuntimeError("boom"))[0]


def test_a_retry_says_which_pool_refused_how_much_and_what_the_smaller_plan_changes() -> None:
    """ggml-vulkan's device out of memory (lavapipe under a data limit: tests/vulkan/test_vulkan_heap.py)."""
    why = (
        "could not load the model: alloc_tensor_range: failed to allocate Vulkan0 buffer of size 352010240; "
        "llama_model_load: error loading model: unable to allocate Vulkan0 buffer; "
        "llama_model_load_from_file_impl: failed to load model"
    )
    words = retry_words(why, ["GPU layers 9 → 3 of 9", "Vulkan0 383.6 MiB → 125.0 MiB"])
    assert words == (
        "could not load the model: Vulkan0 could not allocate 335.7 MiB\n"
        "Trying a smaller plan: GPU layers 9 → 3 of 9; Vulkan0 383.6 MiB → 125.0 MiB."
    )


def test_a_retry_without_a_size_in_llamas_words_says_what_failed() -> None:
    why = "could not create the context: llama_init_from_model: failed to allocate buffer for kv cache"
    assert retry_words(why, ["context 8,192 → 4,096 tokens"]).startswith("could not create the context\nTrying")

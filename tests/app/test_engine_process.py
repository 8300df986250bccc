"""llama.cpp in its own process: a native crash ends the engine process, never the app or pytest.

Real llama.cpp in a real child process: loads, streams, stops, and dies by the
signals a native crash sends (SIGSEGV from a kernel, SIGABRT from a GGML_ASSERT,
SIGKILL from the kernel's OOM killer), each time with words the app can show.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.engine import EngineError, GenerationParams
from app.engine.crash import EngineCrashed, EngineExit
from app.engine.process import EngineProcess
from app.engine.types import PromptProgress
from planner.config import LoadConfig
from tests.support.tiny import ENDLESS, write_tiny_model

pytestmark = pytest.mark.llama

GREEDY = GenerationParams(max_tokens=24, temperature=0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for every purpose that matters here
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return True


def _wait_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def endless(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("endless") / "endless.gguf", ENDLESS)


@pytest.fixture()
def engine():
    e = EngineProcess()
    yield e
    e.close()


def test_llama_cpp_runs_in_another_process(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    report = engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512))
    assert engine.loaded and engine.pid is not None and engine.pid != os.getpid()
    assert report.measurements.kv and report.n_ctx == 512
    pieces = list(engine.generate(engine.tokenize("hello"), GREEDY))
    assert pieces and engine.last_stats.generated_tokens > 0
    assert engine.last_stats.stopped_by in ("eos", "length")
    assert engine.kv_cells_used() > 0


def test_unload_ends_the_process(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512))
    pid = engine.pid
    assert pid is not None
    engine.unload()
    assert not engine.loaded and engine.pid is None
    assert _wait_gone(pid), "the engine process outlived the unload"


def test_the_same_prompt_twice_gives_the_same_greedy_reply(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512))
    prompt = engine.tokenize("the same words")
    first = "".join(engine.generate(prompt, GREEDY))
    second = "".join(engine.generate(prompt, GREEDY))
    assert first == second and engine.last_stats.reused_tokens == len(prompt) - 1  # the prefix was kept


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL, signal.SIGABRT])
def test_a_crash_mid_reply_becomes_a_message(
    engine: EngineProcess, zoo: dict[str, Path], endless: Path, sig: int
) -> None:
    engine.load(endless, LoadConfig(n_ctx=4096))
    pid = engine.pid
    assert pid is not None
    got: list[str] = []
    with pytest.raises(EngineCrashed) as caught:
        for piece in engine.generate(engine.tokenize("hello"), GenerationParams(max_tokens=3000, temperature=0)):
            got.append(piece)
            if len(got) == 5:
                os.kill(pid, sig)
    info = caught.value.exit
    assert len(got) >= 5  # what was streamed before the crash reached the caller
    assert info.signal_name == signal.Signals(sig).name and info.phase == "decode"
    assert info.last_lines, "llama.cpp's last log lines are kept"
    name = signal.Signals(sig).name
    assert name in str(caught.value) and "while writing the reply" in str(caught.value)
    assert not engine.loaded and engine.pid is None
    # the next load is a new process, and it answers
    engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512))
    assert engine.pid not in (None, pid)
    assert "".join(engine.generate(engine.tokenize("again"), GREEDY)) or engine.last_stats.generated_tokens


def test_a_crash_while_loading_is_an_engine_error(engine: EngineProcess, gemma_path: Path) -> None:
    """The engine dies at its first progress report: the demo read without mmap takes far longer to
    load than the signal takes to land."""
    seen: list[float] = []

    def progress(fraction: float) -> None:
        if not seen:
            os.kill(engine.pid or 0, signal.SIGSEGV)
        seen.append(fraction)

    with pytest.raises(EngineCrashed, match=r"SIGSEGV.*while loading the model"):
        engine.load(gemma_path, LoadConfig(n_ctx=512, use_mmap=False), progress)
    assert not engine.loaded


def test_stop_ends_a_reply_at_once_and_keeps_the_engine(engine: EngineProcess, endless: Path) -> None:
    engine.load(endless, LoadConfig(n_ctx=4096))
    started = time.monotonic()
    for count, _ in enumerate(
        engine.generate(engine.tokenize("hello"), GenerationParams(max_tokens=3000, temperature=0)), 1
    ):
        if count == 3:
            engine.stop()
    assert engine.last_stats.stopped_by == "user" and time.monotonic() - started < 30
    assert engine.loaded  # stopping is not unloading
    assert engine.tokenize("still here")


def test_a_caller_that_stops_reading_leaves_the_engine_usable(engine: EngineProcess, endless: Path) -> None:
    engine.load(endless, LoadConfig(n_ctx=4096))
    stream = engine.generate(engine.tokenize("hello"), GenerationParams(max_tokens=3000, temperature=0))
    next(stream)
    stream.close()  # the generator is dropped mid-reply: the child is stopped and drained
    assert engine.last_stats.stopped_by == "user" and engine.loaded
    assert len(engine.tokenize("a b c")) >= 3


def test_cancelling_a_load_is_an_engine_error_and_ends_the_process(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    with pytest.raises(EngineError, match="cancelled"):
        engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512), lambda fraction: False)
    assert not engine.loaded and engine.pid is None


def test_a_bad_file_is_an_engine_error_not_a_crash(engine: EngineProcess, tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(EngineError, match="could not load the model") as caught:
        engine.load(junk, LoadConfig(n_ctx=512))
    assert not isinstance(caught.value, EngineCrashed)


CHILD_OF_A_DYING_APP = """
import sys, os
sys.path.insert(0, {root!r})
from app.engine.process import EngineProcess
from planner.config import LoadConfig
e = EngineProcess()
e.load({model!r}, LoadConfig(n_ctx=512))
print(e.pid, flush=True)
os.kill(os.getpid(), 9)
"""


def test_the_engine_ends_when_the_app_is_killed(zoo: dict[str, Path]) -> None:
    root = str(Path(__file__).resolve().parents[2])
    code = CHILD_OF_A_DYING_APP.format(root=root, model=str(zoo["llama-f16"]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    pid = int(proc.stdout.split()[0])
    assert _wait_gone(pid), "the engine process outlived the app that started it"


# -- what the evidence points to (the exit's words, no process needed) --------------------------------


def test_an_oom_kill_points_to_memory() -> None:
    info = EngineExit(-9, "decode", ("llama_context: n_ctx = 4096",), oom_killed=True)
    assert info.memory and "out-of-memory killer" in info.message()
    assert not EngineExit(-9, "decode", ()).memory  # a plain SIGKILL is not evidence of memory


def test_an_allocation_failure_in_the_last_words_points_to_memory() -> None:
    lines = (
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 512.00 MiB on device 0: cudaMalloc failed: "
        "out of memory",
        "CUDA error: out of memory",
    )
    info = EngineExit(-6, "decode", lines)
    assert info.memory and "SIGABRT" in info.message() and "cudaMalloc failed" in info.message()


def test_a_crash_in_a_cpu_extra_buffer_kernel_points_to_it() -> None:
    lines = (
        "llama_context: graph splits = 1",
        "/vendor/llama.cpp/ggml/src/ggml-cpu/amx/mmq.cpp:2414: GGML_ASSERT(false) failed",
    )
    info = EngineExit(-6, "decode", lines, extra_buffers=("AMX",))
    assert info.cpu_extra_buffer and not info.memory
    assert "GGML_ASSERT" in info.message()
    # no extra buffer in use, or a crash outside compute: the evidence does not point there
    assert not EngineExit(-6, "decode", lines).cpu_extra_buffer
    assert not EngineExit(-6, "idle", lines, extra_buffers=("AMX",)).cpu_extra_buffer


def test_a_plain_exit_reads_as_an_exit() -> None:
    info = EngineExit(3, "loading", ("Traceback (most recent call last):", "RuntimeError: boom"))
    assert info.message().startswith("llama.cpp's engine process exited with status 3 while loading the model")
    assert "RuntimeError: boom" in info.message()


def test_an_engine_killed_while_idle_is_told_once(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    """kill -9 of the engine between replies: the app's watchdog learns how it ended, once, and the
    engine counts as unloaded (the next load starts a new process)."""
    engine.load(str(zoo["llama-f16"]), LoadConfig(n_ctx=512))
    assert engine.exit_while_idle() is None  # alive
    pid = engine.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    ended = None
    while ended is None and time.monotonic() < deadline:
        ended = engine.exit_while_idle()
        time.sleep(0.05)
    assert ended is not None and ended.signal_name == "SIGKILL" and ended.phase == "idle"
    assert "while idle" in ended.message()
    assert not engine.loaded and engine.exit_while_idle() is None  # told once
    engine.load(str(zoo["llama-f16"]), LoadConfig(n_ctx=512))
    assert engine.loaded and engine.pid != pid


def test_a_long_prompt_reports_its_reading_batch_by_batch(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    """The engine process says how much of a prompt it has read after each batch (the chat shows it
    while a long prompt is read); a prompt of one batch says nothing until it is read."""
    engine.load(str(zoo["llama-f16"]), LoadConfig(n_ctx=2048, n_batch=128, n_ubatch=128))
    prompt = (engine.tokenize("the quick brown fox jumps over the lazy dog " * 200))[:1000]
    assert len(prompt) == 1000
    steps: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            reading = engine.last_stats.reading_prompt()
            if reading is not None and reading[0] and (not steps or steps[-1] != reading[0]):
                steps.append(reading[0])
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        list(engine.generate(prompt, GenerationParams(max_tokens=2, temperature=0.0)))
    finally:
        stop.set()
        watcher.join()
    stats = engine.last_stats
    assert stats.prompt_read == 896  # the last batch's start: 7 batches of 128 read before the 8th
    assert all(s % 128 == 0 for s in steps) and steps == sorted(steps)
    list(engine.generate(prompt[:50], GenerationParams(max_tokens=2, temperature=0.0)))
    assert engine.last_stats.prompt_read == 0


def test_a_long_prompt_tells_its_reading_as_the_child_says_it(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    """What the child says while it reads a prompt reaches the caller of generate as it comes (the chat
    shows it from there, polling nothing); a prompt of one batch says nothing."""
    engine.load(str(zoo["llama-f16"]), LoadConfig(n_ctx=2048, n_batch=128, n_ubatch=128))
    prompt = (engine.tokenize("the quick brown fox jumps over the lazy dog " * 200))[:1000]
    told: list[PromptProgress] = []
    list(engine.generate(prompt, GenerationParams(max_tokens=2, temperature=0.0), told.append))
    assert told and [t.read for t in told] == sorted(t.read for t in told)
    assert all(t.read % 128 == 0 and t.total == 1000 and t.picture is None for t in told)
    assert told[-1].read == engine.last_stats.prompt_read == 896
    told.clear()
    list(engine.generate(prompt[:50], GenerationParams(max_tokens=2, temperature=0.0), told.append))
    assert told == []


def test_a_prompt_read_after_a_kept_prefix_keeps_one_total_and_its_cells_follow_the_reading(
    engine: EngineProcess, zoo: dict[str, Path]
) -> None:
    """The second turn's prompt shares its start with the cache: the reading says, from its first word,
    how many tokens are left to read (never the whole prompt first), and the cells llama.cpp holds
    grow batch by batch (the runway and the KV plot read them while a long prompt is read)."""
    engine.load(str(zoo["llama-f16"]), LoadConfig(n_ctx=2048, n_batch=128, n_ubatch=128))
    prompt = (engine.tokenize("the quick brown fox jumps over the lazy dog " * 200))[:1000]
    list(engine.generate(prompt[:600], GenerationParams(max_tokens=1, temperature=0.0)))
    told: list[tuple[PromptProgress, int]] = []
    list(
        engine.generate(
            prompt, GenerationParams(max_tokens=1, temperature=0.0), lambda t: told.append((t, engine.kv_cells_used()))
        )
    )
    stats = engine.last_stats
    left = 1000 - stats.reused_tokens
    assert stats.reused_tokens >= 590 and told[0][0].read == 0
    assert {t.total for t, _ in told} == {left}  # one total, from the first word to the last
    assert [cells for _, cells in told] == [stats.reused_tokens + t.read for t, _ in told]
    assert told[-1][1] > told[0][1]


def test_an_engine_stopped_mid_reply_is_ended_and_said_so(engine: EngineProcess, endless: Path) -> None:
    """SIGSTOP (a hung driver looks like this) used to leave the reply waiting forever: without a token or
    any progress for the stall limit, vramchat ends it and says it was its own doing."""
    engine.load(endless, LoadConfig(n_ctx=4096))
    engine.stall_timeout = 2.0
    pid = engine.pid
    assert pid is not None
    stopped = 0.0
    with pytest.raises(EngineCrashed) as caught:
        for n, _ in enumerate(engine.generate(engine.tokenize("hello"), GenerationParams(max_tokens=3000))):
            if n == 5:
                os.kill(pid, signal.SIGSTOP)
                stopped = time.monotonic()
    assert time.monotonic() - stopped < 10
    message = str(caught.value)
    assert re.search(r"ended by vramchat after [2-9] s without a token or any progress", message), message
    assert "killed (SIGKILL)" not in message and not caught.value.exit.rpc_failure
    assert _wait_gone(pid)


def test_a_stop_the_engine_ignores_is_blamed_on_vramchat_not_an_outside_kill(
    engine: EngineProcess, endless: Path
) -> None:
    engine.load(endless, LoadConfig(n_ctx=4096))
    pid = engine.pid
    assert pid is not None
    with pytest.raises(EngineCrashed) as caught:
        for n, _ in enumerate(engine.generate(engine.tokenize("hello"), GenerationParams(max_tokens=3000))):
            if n == 5:
                os.kill(pid, signal.SIGSTOP)  # it cannot answer the stop
                engine.stop()  # Esc
    message = str(caught.value)
    assert "was ended by vramchat: it had not stopped 5 s after being asked to" in message
    assert "killed (SIGKILL)" not in message

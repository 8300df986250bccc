"""A real load in real llama.cpp runs out of memory; the session retries with the planner's smaller plan.

The child process caps its address space so that the first plan's 1 GiB KV cache cannot
be allocated: llama.cpp fails as it does on a full GPU (`failed to allocate buffer for kv
cache`), and the retry with half the context loads and generates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.data_limit import ENV, MiB
from planner.retry import MAX_RETRIES
from tests.support.tiny import TinySpec, write_tiny_model

# 4 layers x 8 KV heads x 128 x (K + V) x f16 = 16 KiB per token: 1 GiB at 65,536 tokens
BIG_KV = TinySpec("llama", n_embd=1024, n_head=8, n_head_kv=8, n_ff=256, n_ctx_train=131072)
CHILD = Path(__file__).resolve().parents[1] / "support" / "oom_child.py"


def _run_child(model: Path, n_ctx: int, headroom_mib: int) -> dict:
    env = dict(os.environ, MALLOC_ARENA_MAX="1")
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(model), str(n_ctx), str(headroom_mib)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def big_kv_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("oom") / "big-kv.gguf", BIG_KV)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_first_load_fails_and_the_smaller_plan_loads(big_kv_model: Path) -> None:
    out = _run_child(big_kv_model, 65536, 800)
    assert out["planned_ctx"] == 65536 and out["planned_kv"] == 1 << 30
    assert out["loaded"], out.get("error")
    assert len(out["retries"]) == 1
    retry = out["retries"][0]
    assert "failed to allocate" in retry["why"]
    assert retry["changes"][0] == "context 65,536 → 32,768 tokens"
    assert out["n_ctx"] == 32768
    # what llama.cpp allocated is what the smaller plan said
    assert out["kv"] == out["planned_kv_after"] == 1 << 29
    assert out["changes"] == retry["changes"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_a_load_that_cannot_fit_gives_up_with_the_reason(big_kv_model: Path) -> None:
    out = _run_child(big_kv_model, 65536, 60)
    assert not out["loaded"]
    assert "failed to allocate" in out["error"] and f"after {MAX_RETRIES} smaller plans" in out["error"]
    steps = [r["changes"][0] for r in out["retries"]]
    assert (
        steps
        == ["context 65,536 → 32,768 tokens", "context 32,768 → 16,384 tokens", "context 16,384 → 8,192 tokens"][
            :MAX_RETRIES
        ]
    )


def _engine_data(model: Path) -> int:
    """What the engine process holds (RLIMIT_DATA's count, bytes) with `model` loaded at a small context."""
    from app.engine.process import EngineProcess
    from app.engine.types import GenerationParams
    from planner.config import LoadConfig

    engine = EngineProcess(env={k: v for k, v in os.environ.items() if k != ENV})
    try:
        engine.load(model, LoadConfig(n_gpu_layers=0, n_ctx=512, flash_attn=True))
        "".join(engine.generate(engine.tokenize("Hello"), GenerationParams(max_tokens=2, temperature=0.0)))
        assert engine.pid is not None
        (line,) = [x for x in Path(f"/proc/{engine.pid}/status").read_text().splitlines() if x.startswith("VmData:")]
        return int(line.split()[1]) * 1024
    finally:
        engine.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA and /proc are Linux's")
def test_vramchat_says_what_ran_out_and_the_smaller_plan_then_answers(big_kv_model: Path) -> None:
    """The command line, with every engine process capped (VRAMCHAT_ENGINE_DATA_LIMIT_MIB) 768 MiB above what
    it holds at a small context: the 1 GiB KV cache of 65,536 tokens cannot be allocated, the 512 MiB of
    32,768 can."""
    cap = (_engine_data(big_kv_model) + 768 * MiB) // MiB
    args = [str(big_kv_model), "-p", "Hello", "-n", "2", "--ctx", "65536", "--elastic", "off", "--fa", "on"]
    proc = subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, **{ENV: str(cap)}),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("vramchat: ")]
    smaller = "context 65,536 → 32,768 tokens; host RAM "
    assert len(said) == 2, proc.stderr[-3000:]
    assert said[0].startswith(
        f"vramchat: not enough memory: could not create the context: host RAM (CPU) could not allocate 1.00 GiB. "
        f"Trying a smaller plan: {smaller}"
    ), said
    assert said[1].startswith(f"vramchat: loaded with a smaller plan than the one chosen: {smaller}"), said
    assert proc.stdout.strip()  # the smaller plan's answer

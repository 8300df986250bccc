"""One-shot and take-away: `vramchat MODEL -p TEXT` answers on stdout, `--plan --llama-args` prints the
flags that make llama.cpp run the same configuration (checked by loading with exactly those values)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from app.devices import probe_devices
from app.engine.planned_actual import compare_load
from app.engine.process import EngineProcess
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.gguf import read_gguf
from planner.llama_args import from_llama_args, to_llama_args
from planner.memory import plan_memory

pytestmark = pytest.mark.llama
VRAMCHAT = str(Path(sys.executable).with_name("vramchat"))


def _run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([VRAMCHAT, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_a_question_answered_on_stdout(gemma_path: Path) -> None:
    proc = _run(str(gemma_path), "-p", "What is the capital of France?", "--temp", "0")
    assert proc.returncode == 0, proc.stderr
    assert "Paris" in proc.stdout and proc.stdout.endswith("\n") and not proc.stdout.startswith(" ")


@pytest.mark.parametrize(
    ("question", "answer"), [("What is the capital of France?", "Paris"), ("What is the capital of Italy?", "Rome")]
)
def test_the_demo_answers_the_readmes_question_without_being_told_a_temperature(
    gemma_path: Path, question: str, answer: str
) -> None:
    """A base model in the transcript format decodes greedily unless the user set a temperature: the
    README's own question gets Paris every time (sampled at 0.2 it once said "France is the capital of
    France." and "10,000,000,000.")."""
    for _ in range(2):
        proc = _run(str(gemma_path), "-p", question)
        assert proc.returncode == 0, proc.stderr
        assert answer in proc.stdout and "capital of " + answer not in proc.stdout, proc.stdout


def test_the_answer_as_json_with_memory_per_device(gemma_path: Path) -> None:
    proc = _run(str(gemma_path), "-p", "What is the capital of France?", "--json", "--temp", "0", "-n", "32")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert "Paris" in data["answer"] and 0 < data["tokens"] <= 32 and data["tokens_per_second"] > 0
    memory = data["memory"]
    # planned for what is allocated now, against what llama.cpp allocated: within the log's rounding
    assert abs(memory["planned"]["CPU"] - memory["allocated"]["CPU"]) < 64 * 1024
    assert memory["kv_committed"]["CPU"] > 0 and memory["kv_in_use"]["cells"] > 0
    assert data["config"]["n_ctx"] <= data["max_ctx"]


def test_a_model_that_does_not_fit_is_not_loaded(zoo: dict[str, Path]) -> None:
    proc = _run(str(zoo["llama-f16"]), "-p", "hello", "--ram", "2MiB")  # 4 MiB fits with a micro-batch of 128
    assert proc.returncode == 3 and "does not fit" in proc.stderr and not proc.stdout


def test_a_load_that_fails_has_its_own_exit_status(tmp_path: Path) -> None:
    from tests.support.tiny import TinySpec, write_tiny_model

    path = write_tiny_model(tmp_path / "t.gguf", TinySpec("llama"))
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[: len(data) - 4096]))  # the header is whole, the weights are not
    proc = _run(str(path), "-p", "hello")
    assert proc.returncode in (1, 4), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.strip()


def test_llama_args_run_the_planned_configuration(gemma_path: Path, zoo: dict[str, Path]) -> None:
    proc = _run("--plan", str(gemma_path), "--llama-args", "--ctx", "8192")
    assert proc.returncode == 0, proc.stderr
    flags = shlex.split(proc.stdout)
    assert flags[:2] == ["-m", str(gemma_path)] and "-c" in flags and "-fa" in flags
    plan_json = json.loads(_run("--plan", str(gemma_path), "--json", "--ctx", "8192").stdout)
    assert plan_json["llama_args"] == flags
    for path in (str(gemma_path), str(zoo["gemma3"])):
        model = load_anatomy(read_gguf(path))
        plan = plan_memory(
            model, LoadConfig(n_ctx=3000, flash_attn=True, n_seq_max=2), [], probe_devices(cpu_only=True).host
        )
        back_path, config = from_llama_args(to_llama_args(plan, path))
        assert back_path == path
        engine = EngineProcess()
        try:
            report = engine.load(path, config)  # llama.cpp with exactly the printed values
            rows = [r for r in compare_load(plan, report) if r.kind != "process"]
            assert rows and all(r.matches for r in rows), rows
        finally:
            engine.close()

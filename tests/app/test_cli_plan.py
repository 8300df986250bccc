"""`vramchat --plan`: the JSON contract, the table, exit statuses and what it must not import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT, env=full_env, timeout=120
    )


def test_json_contract_on_gemma(gemma_path: Path) -> None:
    proc = _run("--plan", str(gemma_path), "--json", "--vram", "4GiB")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == 1
    assert data["llama_cpp_build"] == "llama-cpp-python 0.3.36"
    model = data["model"]
    assert model["architecture"] == "gemma3" and model["n_layer"] == 18
    assert model["n_ctx_train"] == 32768 and model["n_vocab"] == 262144
    assert model["file_bytes"] == gemma_path.stat().st_size and model["n_params"] > 260_000_000
    for key in (
        "n_gpu_layers",
        "n_ctx",
        "n_batch",
        "n_ubatch",
        "type_k",
        "type_v",
        "flash_attn",
        "swa_full",
        "n_seq_max",
        "tensor_split",
    ):
        assert key in data["config"]
    assert data["verdict"] == "full_gpu"
    (gpu,) = data["devices"]
    for key in (
        "name",
        "kind",
        "total",
        "free",
        "margin",
        "weights",
        "kv",
        "recurrent",
        "compute",
        "overhead",
        "planned",
    ):
        assert isinstance(gpu[key], (int, str)), key
    assert gpu["planned"] == gpu["weights"] + gpu["kv"] + gpu["recurrent"] + gpu["compute"] + gpu["overhead"]
    host = data["host"]
    for key in (
        "total",
        "free",
        "weights",
        "weights_mapped",
        "kv",
        "recurrent",
        "output",
        "compute",
        "overhead",
        "planned",
    ):
        assert isinstance(host[key], int), key
    assert host["output"] == 262144 * 4
    assert data["reasons"] and isinstance(data["alternatives"], list)
    for alt in data["alternatives"]:
        assert {"config", "verdict", "note"} <= set(alt)


def test_fixed_configuration_is_evaluated_as_given(gemma_path: Path) -> None:
    proc = _run(
        "--plan",
        str(gemma_path),
        "--json",
        "--cpu",
        "--ctx",
        "2048",
        "--fa",
        "off",
        "--ctk",
        "q8_0",
        "--ubatch",
        "256",
        "--swa-full",
        "on",
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    cfg = data["config"]
    assert cfg["n_ctx"] == 2048 and cfg["flash_attn"] is False and cfg["type_k"] == "q8_0"
    assert cfg["type_v"] == "f16" and cfg["n_ubatch"] == 256 and cfg["swa_full"] is True
    assert data["verdict"] == "cpu_only" and data["solved"] is False
    assert data["devices"] == []


def test_exit_status_3_when_it_does_not_fit(gemma_path: Path) -> None:
    proc = _run("--plan", str(gemma_path), "--json", "--vram", "1GiB", "--ngl", "19", "--ram", "256MiB")
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["verdict"] == "no_fit"


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--plan"], 2, "--plan needs a MODEL"),
        (["-p", "hi"], 2, "error: -p needs a MODEL"),  # the flag the user gave, not --plan
        (["--plan", "x.gguf", "--vram", "lots"], 2, "unknown size unit"),
        (["--plan", "x.gguf", "--vram", "0"], 2, "positive"),
        (["--plan", "x.gguf", "--vram", "-3GiB"], 2, "size must be positive: '-3GiB'"),
        (["--plan", "x.gguf", "--margin", "-1GiB"], 2, "size must be positive"),
        (["--plan", "x.gguf", "--ctx", "-1"], 2, "must not be negative"),
        (["--plan", "x.gguf", "--fa", "maybe"], 2, "invalid choice"),
        (["--json"], 2, "--json goes with"),
        (["--plan", "x.gguf", "--ctk", "q9_9"], 2, "'q9_9' is not a KV cache type llama.cpp accepts"),
    ],
)
def test_usage_errors_exit_2(args: list[str], code: int, message: str) -> None:
    proc = _run(*args)
    assert proc.returncode == code
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_files_exit_1_without_traceback(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    for target in (junk, tmp_path / "missing.gguf", tmp_path):
        proc = _run("--plan", str(target))
        assert proc.returncode == 1
        assert str(target) in proc.stderr
        assert "Traceback" not in proc.stderr


def test_unknown_quantized_v_config_is_a_usage_error(gemma_path: Path) -> None:
    proc = _run("--plan", str(gemma_path), "--cpu", "--ctv", "q8_0", "--fa", "off")
    assert proc.returncode == 2
    assert "flash attention" in proc.stderr


def test_table_output_explains_the_plan(zoo: dict[str, Path]) -> None:
    proc = _run("--plan", str(zoo["llama-q4_k"]), "--vram", "8GiB")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for needle in ("Verdict: FITS", "CUDA0", "host RAM", "Why", "context", "GPU layers"):
        assert needle in out


def test_plan_imports_neither_textual_nor_llama_cpp(zoo: dict[str, Path]) -> None:
    """Nor what a local file's plan does not need: the hub and URL sources, the statistics module, subprocess (no
    probe starts where the machine's figures are kept), shutil and its archive modules (argparse's help width)."""
    code = (
        "import sys, io, contextlib\n"
        "from app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['--plan', {str(zoo['gemma3'])!r}, '--json'])\n"
        "assert rc == 0, rc\n"
        "never = ('textual', 'llama_cpp', 'statistics', 'subprocess', 'shutil', 'lzma', 'bz2')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in never]\n"
        "bad += [m for m in sys.modules if m.startswith('app.sources')]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_simulated_devices_from_the_environment(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "6GiB/2GiB,ram=16GiB")
    assert main(["--plan", str(zoo["llama-f16"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (gpu,) = data["devices"]
    assert gpu["total"] == 6 * 1024**3 and gpu["free"] == 4 * 1024**3
    assert data["host"]["total"] == 16 * 1024**3


def test_a_vision_projector_adds_its_weights_and_compute(tmp_path: Path, zoo: dict[str, Path]) -> None:
    from tests.support.tiny_projectors import write_mlp_projector

    mmproj = write_mlp_projector(tmp_path / "mmproj-tiny.gguf")
    base = _run("--plan", str(zoo["llama-f16"]), "--json", "--vram", "8GiB")
    with_proj = _run("--plan", str(zoo["llama-f16"]), "--json", "--vram", "8GiB", "--mmproj", str(mmproj))
    assert base.returncode == with_proj.returncode == 0, with_proj.stderr
    a, b = json.loads(base.stdout), json.loads(with_proj.stdout)
    kinds = {buf["kind"]: buf["bytes"] for buf in b["buffers"] if buf["kind"].startswith("projector")}
    assert kinds["projector_weights"] > 0 and kinds["projector_compute"] > 0
    # the projector goes to the first GPU, and is named as an estimate where it is one
    assert b["devices"][0]["planned"] >= a["devices"][0]["planned"] + kinds["projector_weights"]
    assert any("projector" in e for e in b["estimates"])
    not_clip = _run("--plan", str(zoo["llama-f16"]), "--mmproj", str(zoo["llama-f16"]))
    assert not_clip.returncode == 1 and "not a multimodal projector" in not_clip.stderr


def test_image_max_tokens_caps_the_projectors_largest_image(tmp_path: Path, zoo: dict[str, Path]) -> None:
    """--image-max-tokens plans for the largest image llama-server would then accept (the figure
    test_projector_accuracy checks against libmtmd for this projector and cap), and passes the flag on."""
    from planner.projector import read_projector
    from planner.projectors.compute import peak_compute
    from tests.support.tiny_projectors import LARGEST, write_tiny_projector

    spec, cap = LARGEST["qwen3vl"]
    mmproj = str(write_tiny_projector(tmp_path / "mmproj-qwen3vl.gguf", spec))
    plan = ["--plan", str(zoo["llama-f16"]), "--json", "--cpu", "--mmproj", mmproj]
    default, capped = _run(*plan), _run(*plan, "--image-max-tokens", str(cap))
    assert default.returncode == capped.returncode == 0, capped.stderr

    def compute(out: str) -> tuple[int, bool]:
        data = json.loads(out)
        size = next(b["bytes"] for b in data["buffers"] if b["kind"] == "projector_compute")
        return size, data["config"]["flash_attn"]

    size, fa = compute(capped.stdout)
    assert size == peak_compute(read_projector(mmproj), fa, image_max_tokens=cap)["CPU"]
    assert size < compute(default.stdout)[0]
    assert json.loads(capped.stdout)["llama_args"][-4:] == ["--mmproj", mmproj, "--image-max-tokens", str(cap)]
    alone = _run("--plan", str(zoo["llama-f16"]), "--image-max-tokens", "256")
    assert alone.returncode == 2 and "--image-max-tokens goes with --mmproj" in alone.stderr


def test_an_unknown_architecture_gets_an_estimate_not_a_crash(tmp_path: Path) -> None:
    import gguf as gguf_lib

    from tests.support.tiny import ZOO, write_tiny_model

    # Mamba's tensors under an architecture name the planner has never heard of
    src = write_tiny_model(tmp_path / "mamba.gguf", ZOO["mamba"])
    reader = gguf_lib.GGUFReader(src)
    writer = gguf_lib.GGUFWriter(str(tmp_path / "mystery.gguf"), "mystery")
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        name = field.name.replace("mamba.", "mystery.")
        vtype = field.types[0]
        if vtype == gguf_lib.GGUFValueType.ARRAY:
            writer.add_key_value(name, field.contents(), vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(name, field.contents(), vtype)
    for t in reader.tensors:
        writer.add_tensor(t.name, t.data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    proc = _run("--plan", str(tmp_path / "mystery.gguf"), "--json", "--cpu")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["model"]["exact"] is False
    assert any("compute buffers are a rough estimate" in e for e in data["estimates"])
    assert data["host"]["compute"] > 0


def test_a_reader_that_stops_early_ends_the_plan_quietly(zoo: dict[str, Path]) -> None:
    """`vramchat --plan MODEL | head -1`: the closed pipe is no error to report."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--plan", str(zoo["llama-f16"])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything was written
    err = proc.stderr.read()
    assert proc.wait(60) == 141 and err == "", err

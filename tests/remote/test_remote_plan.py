"""`--plan` and `--quants` of models that are not on this machine: the same plans, from their headers alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.gguf import read_gguf
from tests.remote.conftest import REPO, TEST_QUANTS, plan_json, run_cli
from tests.support.hub_server import LocalHub

WHAT_IF = ("--vram", "2GiB", "--ram", "16GiB")  # the same devices for every plan compared


def _without_location(plan: dict) -> dict:
    """The plan less what names where the file is (its path, and llama.cpp's flag for it)."""
    plan = json.loads(json.dumps(plan))
    plan["model"].pop("path")
    plan.pop("llama_args")
    return plan


def _header_bytes(path: Path) -> int:
    return sum(shard.data_offset for shard in read_gguf(path).shards)


@pytest.mark.parametrize("where", ["url", "hub"])
@pytest.mark.parametrize("which", ["demo", "split"])
def test_a_remote_plan_is_the_local_plan_buffer_for_buffer_from_the_header_alone(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], gemma_path: Path, split_demo: list[Path], where: str, which: str
) -> None:
    local = gemma_path if which == "demo" else split_demo[0]
    files = [local] if which == "demo" else split_demo
    if where == "url":
        urls = [hub.add_file(f.name, f) for f in files]
        ref = urls[0]
    else:
        hub.add_repo("acme/one", {f.name: f for f in files})
        ref = f"hf:acme/one/{local.name}"
    hub.clear_log()
    remote = plan_json(capsys, ref, *WHAT_IF)
    read = hub.bytes_sent()
    assert _without_location(remote) == _without_location(plan_json(capsys, str(local), *WHAT_IF))
    assert remote["model"]["file_bytes"] == sum(f.stat().st_size for f in files)
    header = _header_bytes(local)
    assert header < read < 2 * header, (read, header)  # the header, never the weights


def test_llama_args_name_the_remote_file_as_llama_cpp_does(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], gemma_path: Path
) -> None:
    url = hub.add_file("demo.gguf", gemma_path)
    assert plan_json(capsys, url, *WHAT_IF)["llama_args"][:2] == ["-mu", url]
    args = plan_json(capsys, f"hf:{REPO}:Q4_K_M", *WHAT_IF)["llama_args"]
    assert args[:4] == ["-hfr", REPO, "-hff", "gemma-3-270m-Q4_K_M.gguf"]


def test_the_hub_ref_forms_name_the_same_file(hub: LocalHub, capsys: pytest.CaptureFixture[str]) -> None:
    paths = {
        plan_json(capsys, word, *WHAT_IF)["model"]["path"]
        for word in (
            f"hf:{REPO}:Q4_K_M",
            f"hf:{REPO}:q4_k_m",
            f"{REPO}/gemma-3-270m-Q4_K_M.gguf",
            f"{hub.url}/{REPO}/resolve/main/gemma-3-270m-Q4_K_M.gguf",
        )
    }
    assert paths == {f"hf:{REPO}/gemma-3-270m-Q4_K_M.gguf"}


def test_a_model_planned_once_plans_again_from_the_cache_and_offline(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, gemma_path: Path
) -> None:
    from huggingface_hub import constants

    url = hub.add_file("demo.gguf", gemma_path)
    first_hub = plan_json(capsys, f"hf:{REPO}:Q4_K_M", *WHAT_IF)
    first_url = plan_json(capsys, url, *WHAT_IF)
    hub.clear_log()
    assert plan_json(capsys, f"hf:{REPO}:Q4_K_M", *WHAT_IF) == first_hub
    assert not [e for e in hub.requests() if e.range], "the second plan reads no header bytes"
    hub.stop()  # no server: as without network
    code, out, err = run_cli(capsys, "--plan", f"hf:{REPO}:Q4_K_M", "--json", *WHAT_IF)
    assert code == 0 and json.loads(out) == first_hub
    assert "cannot be reached" in err and f"{REPO} as listed on" in err
    code, out, err = run_cli(capsys, "--plan", url, "--json", *WHAT_IF)
    assert code == 0 and json.loads(out) == first_url and "planned from the header read on" in err
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # HF_HUB_OFFLINE=1: the network is not even tried
    code, out, err = run_cli(capsys, "--plan", f"hf:{REPO}:Q4_K_M", "--json", *WHAT_IF)
    assert code == 0 and json.loads(out) == first_hub and "offline mode" in err


def test_quants_plans_every_model_of_a_repo_once_with_the_best_marked(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], repo_files: dict[str, Path]
) -> None:
    code, out, err = run_cli(capsys, "--quants", REPO, "--json", *WHAT_IF)
    assert code == 0, err
    data = json.loads(out)
    rows = data["models"]
    quants = [r["quant"] for r in rows]
    assert sorted(quants) == sorted([*TEST_QUANTS, "Q8_0"])  # the split Q8_0 is one model, beside the whole one
    split = next(r for r in rows if len(r["files"]) == 2)
    assert (
        split["size"]
        == sum(f["size"] for f in split["files"])
        == sum(p.stat().st_size for name, p in repo_files.items() if name.startswith("Q8_0/"))
    )
    assert all(r["projectors"] and r["projectors"][0]["name"] == "mmproj-F16.gguf" for r in rows)
    assert [r["size"] for r in rows] == sorted(r["size"] for r in rows)
    best = [r for r in rows if r["best"]]
    assert len(best) == 1 and data["best"]["ref"] == best[0]["ref"] and data["best"]["why"]
    # with 2 GiB of GPU: the largest quant that runs wholly on the GPU at the context wished
    full = [r for r in rows if r["verdict"] == "full_gpu" and r["n_ctx"] == 32768]
    assert full and best[0]["ref"] == max(full, key=lambda r: r["size"])["ref"]
    assert "wholly on the GPU" in data["why"]
    # each row is the plan --plan prints for that file with the same flags
    q2 = next(r for r in rows if r["quant"] == "Q2_K")
    single = plan_json(capsys, q2["ref"], *WHAT_IF)
    assert single["devices"][0]["planned"] == q2["planned"]["CUDA0"] and single["config"] == q2["config"]


def test_of_one_quant_in_one_file_and_split_the_best_is_the_one_file(
    hub: LocalHub, capsys: pytest.CaptureFixture[str]
) -> None:
    """With 1400 MiB of GPU, Q8_0 is the largest quant wholly on the GPU: the whole file, not its split copy
    (whose extra headers make it a few KiB larger)."""
    code, out, err = run_cli(capsys, "--quants", REPO, "--json", "--vram", "1400MiB", "--ram", "16GiB")
    assert code == 0, err
    data = json.loads(out)
    q8 = [r for r in data["models"] if r["quant"] == "Q8_0"]
    assert len(q8) == 2 and all(r["verdict"] == "full_gpu" for r in q8)
    best = next(r for r in data["models"] if r["best"])
    assert best["quant"] == "Q8_0" and len(best["files"]) == 1 and "wholly on the GPU" in data["why"]


def test_quants_table_reads_each_header_once(hub: LocalHub, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--quants", REPO, *WHAT_IF)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{REPO} (commit ") and "6 models" in lines[0]
    assert sum(1 for line in lines if line.startswith("* ")) == 2  # the row, and the line saying why
    assert "Q8_0 (2 files)" in out and "mmproj-F16.gguf" in out and "tok/s" in out
    hub.clear_log()
    code, again, _ = run_cli(capsys, "--quants", REPO, *WHAT_IF)
    assert again == out
    assert code == 0 and [e.path.split("?")[0] for e in hub.requests() if e.path.startswith("/api/models")] == [
        f"/api/models/{REPO}"
    ]
    assert not [e for e in hub.requests() if e.range]


def test_quants_of_a_local_folder(capsys: pytest.CaptureFixture[str], repo_files: dict[str, Path]) -> None:
    folder = repo_files["gemma-3-270m-Q2_K.gguf"].parent
    code, out, err = run_cli(capsys, "--quants", str(folder), "--json", "--cpu")
    assert code == 0, err
    rows = json.loads(out)["models"]
    assert len(rows) == len(TEST_QUANTS) and all(r["verdict"] == "cpu_only" for r in rows)
    # tok/s: the decode speed --plan predicts for each file on this CPU (measured once, then kept)
    for row in rows:
        speed = plan_json(capsys, row["ref"], "--cpu")["speed"]["decode_start"]
        assert row["tokens_per_second"] == speed["tokens_per_second"] and row["tokens_per_second"] > 0


def test_quants_on_a_card_without_a_known_bandwidth_say_so(hub: LocalHub, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--quants", REPO, *WHAT_IF)  # a what-if card with no bw=
    assert code == 0
    data = json.loads(run_cli(capsys, "--quants", REPO, "--json", *WHAT_IF)[1])
    assert all(r["tokens_per_second"] is None for r in data["models"] if r["n_gpu_layers"])
    with_bw = json.loads(run_cli(capsys, "--quants", REPO, "--json", "--vram", "2GiB,bw=100GB/s", "--ram", "16GiB")[1])
    assert all(r["tokens_per_second"] and r["tokens_per_second"] > 0 for r in with_bw["models"])
    # a smaller file reads fewer bytes a token on the same card: never slower
    by_size = sorted((r for r in with_bw["models"] if r["verdict"] == "full_gpu"), key=lambda r: r["size"])
    assert [r["tokens_per_second"] for r in by_size] == sorted((r["tokens_per_second"] for r in by_size), reverse=True)
    assert "tok/s: predicted decode" in out


@pytest.mark.llama
def test_verify_runs_llama_cpp_s_dry_run_on_a_sparse_copy_of_a_remote_header(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], gemma_path: Path
) -> None:
    hub.clear_log()
    code, out, err = run_cli(capsys, "--plan", f"hf:{REPO}:Q4_K_M", "--verify")
    assert code == 0, err
    assert "every figure as planned" in out
    assert hub.bytes_sent() < 2 * _header_bytes(gemma_path)  # nothing downloaded

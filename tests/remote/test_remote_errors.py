"""Bad input and no network: each a clear one-line message and an exit status, never a traceback."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.remote.conftest import REPO, run_cli
from tests.support.hub_server import LocalHub
from tests.support.tiny import TinySpec, write_tiny_model


def _one_line_error(capsys: pytest.CaptureFixture[str], *words: str, code: int = 1) -> str:
    got, out, err = run_cli(capsys, *words)
    assert got == code, (out, err)
    lines = [line for line in err.splitlines() if line.startswith("vramchat: error: ")]
    assert len(lines) == 1 and "Traceback" not in err and "please report" not in err, err
    return lines[0]


@pytest.fixture
def gated(hub: LocalHub, tmp_path: Path) -> str:
    model = write_tiny_model(tmp_path / "gated-Q8_0.gguf", TinySpec("llama", name="Gated"))
    hub.add_repo("acme/gated", {"gated-Q8_0.gguf": model}, gated=True)
    return "hf:acme/gated:Q8_0"


def test_a_gated_repo_without_a_token_says_what_to_do(
    gated: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, hub: LocalHub
) -> None:
    line = _one_line_error(capsys, "--plan", gated)
    assert "acme/gated is a gated repository" in line and "HF_TOKEN" in line and f"{hub.url}/acme/gated" in line
    monkeypatch.setenv("HF_TOKEN", "hf_someone_else")
    assert "the token in use has no access" in _one_line_error(capsys, "--plan", gated)
    monkeypatch.setenv("HF_TOKEN", hub.token)
    code, out, err = run_cli(capsys, "--plan", gated)
    assert code == 0 and "Verdict:" in out, err


def test_what_the_hub_does_not_have(hub: LocalHub, capsys: pytest.CaptureFixture[str]) -> None:
    assert "no such repository on the hub" in _one_line_error(capsys, "--plan", "hf:acme/nothing-here:Q4_K_M")
    assert "no such repository" in _one_line_error(capsys, "--quants", "acme/nothing-here")
    line = _one_line_error(capsys, "--plan", f"hf:{REPO}:Q9_9")
    assert "no Q9_9 file" in line and "Q4_K_M" in line
    assert "no such file in the repository" in _one_line_error(capsys, "--plan", f"{REPO}/nope-Q4_K_M.gguf")
    assert "Q8 names 2 files" in _one_line_error(capsys, "--plan", f"hf:{REPO}:Q8")  # Q8_0, and Q8_0 in 2 shards
    code, out, _ = run_cli(capsys, "--plan", f"hf:{REPO}")  # several quants, none named: llama.cpp's Q4_K_M
    assert code == 0 and "Verdict:" in out


def test_an_url_that_is_not_a_gguf_and_a_server_without_ranges(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], tmp_path: Path, gemma_path: Path
) -> None:
    page = tmp_path / "index.gguf"
    page.write_text("<!DOCTYPE html><html>a web page, not a model</html>")
    assert "not a GGUF file" in _one_line_error(capsys, "--plan", hub.add_file("index.gguf", page))
    assert "no such file on the server (HTTP 404)" in _one_line_error(capsys, "--plan", f"{hub.url}/files/gone.gguf")
    url = hub.add_file("demo.gguf", gemma_path)
    hub.mode = "no-range"
    hub.clear_log()
    line = _one_line_error(capsys, "--plan", url)
    assert "sends whole files only (no HTTP range requests)" in line
    assert hub.bytes_sent() < 64 * 1024 * 1024  # refused after the status line, not read to the end


def test_a_header_larger_than_any_real_one_is_refused_without_reading_on(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A legal GGUF whose vocabulary holds 12 million empty strings (96 MB of zeros, a sparse file):
    the local reader reads it, the remote one stops at 64 MiB."""
    count = 12_000_000
    key = b"tokenizer.ggml.tokens"
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, count)
    path = tmp_path / "huge-header.gguf"
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(len(head) + 8 * count + 4096)
    hub.clear_log()
    line = _one_line_error(capsys, "--plan", hub.add_file(path.name, path))
    assert "more than any real GGUF header: not read further" in line
    assert hub.bytes_sent() <= 64 * 1024 * 1024


def test_no_network_for_a_model_never_seen(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    url = f"{hub.url}/files/never.gguf"
    hub.stop()
    assert "cannot connect" in _one_line_error(capsys, "--plan", url)
    line = _one_line_error(capsys, "--quants", REPO)
    assert "cannot connect" in line and "never listed before" in line
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert "offline mode (HF_HUB_OFFLINE) is on" in _one_line_error(capsys, "--plan", f"hf:{REPO}:Q4_K_M")


def test_a_remote_model_not_on_disk_and_no_terminal_to_ask_on_says_how_to_download_it(
    hub: LocalHub, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _one_line_error(capsys, f"hf:{REPO}:Q4_K_M", "-p", "hello", code=1)
    assert f"vramchat --download hf:{REPO}:Q4_K_M" in line


def test_the_local_picker_keeps_working_offline(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "models").mkdir()
    write_tiny_model(tmp_path / "models" / "tiny.gguf", TinySpec("llama", name="Tiny"))
    hub.stop()
    code, out, err = run_cli(capsys, "--list", "--models-dir", str(tmp_path / "models"))
    assert code == 0 and "Tiny" in out, err

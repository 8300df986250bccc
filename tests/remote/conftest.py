"""Remote models against a local hub: the real huggingface_hub client, pointed at 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hub_server import LocalHub
from tests.support.remote_models import quant_repo, split_model

REPO = "acme/gemma-3-270m-GGUF"
TEST_QUANTS = ("Q2_K", "Q4_0", "Q4_K_M", "Q8_0", "F16")


@pytest.fixture(scope="session")
def repo_files(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A repo of quants of the demo (sparse files), a split quant and a projector."""
    return quant_repo(gemma_path, tmp_path_factory.mktemp("repo"), quants=TEST_QUANTS)


@pytest.fixture(scope="session")
def split_demo(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The demo cut into 3 shards, its real data in them."""
    return split_model(gemma_path, tmp_path_factory.mktemp("split"), 3)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, repo_files: dict[str, Path]) -> Iterator[LocalHub]:
    """The local hub with the repo of quants, as huggingface_hub's endpoint (in this process and in the
    processes it starts); no token, not offline, a Hugging Face home of the test's own."""
    from huggingface_hub import constants

    from app import sources

    with LocalHub() as server:
        server.add_repo(REPO, repo_files, downloads=1000)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setattr(constants, "ENDPOINT", server.url)  # what HF_ENDPOINT sets at import
        monkeypatch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}"
        )
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        hf_home = tmp_path / "hf-home"
        monkeypatch.setenv("HF_HOME", str(hf_home))
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(hf_home / "token"))
        monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(hf_home / "stored_tokens"))
        sources._resolved.clear()
        yield server
        sources._resolved.clear()


def run_cli(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    """`vramchat WORDS` in this process: (exit status, stdout, stderr)."""
    from app import sources
    from app.cli import main

    sources._resolved.clear()  # each command line is a process of its own
    sources._said.clear()
    code = main(list(words))
    out, err = capsys.readouterr()
    return code, out, err


def plan_json(capsys: pytest.CaptureFixture[str], model: str, *flags: str) -> dict:
    code, out, err = run_cli(capsys, "--plan", model, "--json", *flags)
    assert code == 0, err
    return json.loads(out)

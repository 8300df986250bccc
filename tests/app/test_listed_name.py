"""A MODEL given by the name `vramchat --list` shows it under (app/cli/listed_name.py): found in the list's
folders from any working folder, with or without `.gguf`; a name two files share is refused with both paths;
an unknown name says so; and a plan by name is never said again from the replay cache (the file may move)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app import cli
from app.cli.listed_name import names_of
from app.paths import models_dir
from app.settings import Settings, save_settings


@pytest.fixture
def listed(zoo: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One tiny model in vramchat's models folder, planned from another folder, known caches not scanned."""
    save_settings(Settings(scan_known_caches=False))
    folder = models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "Tiny-Llama-Q4_K.gguf"
    shutil.copy(zoo["llama-q4_k"], model)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return model


def _planned_path(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    assert cli.main(["--plan", *words, "--json"]) == cli.EXIT_OK
    return json.loads(capsys.readouterr().out)["model"]["path"]


def test_a_listed_model_is_planned_by_its_name(listed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _planned_path(capsys, "Tiny-Llama-Q4_K.gguf") == str(listed)
    assert _planned_path(capsys, "tiny-llama-q4_k") == str(listed)  # without .gguf, in any case


def test_a_name_in_a_models_dir_folder(
    zoo: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    save_settings(Settings(scan_known_caches=False))
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(zoo["llama-q4_k"], folder / "only-here.gguf")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--plan", "only-here", "--json"]) == cli.EXIT_BAD_FILE  # not in the list's folders
    capsys.readouterr()
    assert _planned_path(capsys, "only-here", "--models-dir", str(folder)) == str(folder / "only-here.gguf")


def test_a_name_two_files_share_is_refused_with_both(
    listed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(listed, other / listed.name)
    assert cli.main(["--plan", "tiny-llama-q4_k", "--models-dir", str(other)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "tiny-llama-q4_k names 2 models" in err and str(listed) in err and str(other / listed.name) in err


def test_an_unknown_name_says_where_to_look(listed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--plan", "no-such-model"]) == cli.EXIT_BAD_FILE
    err = capsys.readouterr().err
    assert "no-such-model: no such file, and no model vramchat lists has that name (vramchat --list)" in err


def test_a_plan_by_name_follows_the_file_where_it_moves(listed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _planned_path(capsys, "tiny-llama-q4_k") == str(listed)
    moved = listed.parent / "sub" / listed.name
    moved.parent.mkdir()
    listed.rename(moved)
    assert _planned_path(capsys, "tiny-llama-q4_k") == str(moved)


def test_a_split_model_answers_to_its_stem() -> None:
    names = names_of("/m/Big-Model-Q4_K_M-00001-of-00003.gguf")
    assert {"big-model-q4_k_m", "big-model-q4_k_m-00001-of-00003", "big-model-q4_k_m-00001-of-00003.gguf"} <= names

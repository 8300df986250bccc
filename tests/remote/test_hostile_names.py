"""A hub (or a mirror, or anyone on the path to a plain-http one) that answers file names or a repository
id meant to write outside the models folder: refused in words, nothing written anywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.sources.safe_paths import name_problem, repo_id_problem
from tests.remote.conftest import REPO, run_cli
from tests.support.hub_server import LocalHub

EVIL = "acme/evil"


def _files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """vramchat's home (its models folder inside) and a folder beside it that nothing may touch."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    outside.mkdir()
    monkeypatch.setenv("VRAMCHAT_HOME", str(home))
    return home, outside


def _models(home: Path) -> Path:
    return home / "data" / "models"  # app.paths.models_dir() under VRAMCHAT_HOME


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "backslash"])
def test_a_file_name_that_climbs_out_of_the_models_folder_is_refused(
    hub: LocalHub,
    repo_files: dict[str, Path],
    homes: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    how: str,
) -> None:
    home, outside = homes
    models = _models(home)
    climb = os.path.relpath(outside, models / "acme" / "evil").replace(os.sep, "/")
    name = {
        "dot-dot": f"{climb}/evil-Q4_0.gguf",
        "absolute": f"{outside}/evil-Q4_0.gguf",
        "backslash": "..\\..\\evil-Q4_0.gguf",
    }[how]
    hub.add_repo(EVIL, {name: repo_files["gemma-3-270m-Q4_0.gguf"]})  # its true sha256 published

    code, out, err = run_cli(capsys, "--download", f"hf:{EVIL}:Q4_0")

    assert code == 1
    assert "refused the file name" in err and "nothing was written" in err
    assert "please report this" not in err + out
    assert _files_under(outside) == []
    assert _files_under(models) == []


def test_a_repository_id_that_climbs_out_is_refused(
    hub: LocalHub, homes: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home, outside = homes
    hub.repos[REPO].listed_id = "../../.."

    code, _, err = run_cli(capsys, "--download", f"hf:{REPO}:Q4_0")

    assert code == 1
    assert "refused the repository id '../../..'" in err
    assert _files_under(outside) == [] and _files_under(_models(home)) == []


def test_a_symlink_in_the_models_folder_is_not_written_through(
    hub: LocalHub, homes: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home, outside = homes
    models = _models(home)
    models.mkdir(parents=True)
    (models / "acme").symlink_to(outside, target_is_directory=True)  # models/acme -> a folder elsewhere

    code, _, err = run_cli(capsys, "--download", f"hf:{REPO}:Q4_0")

    assert code == 1
    assert "outside the models folder" in err
    assert _files_under(outside) == []


def test_a_safe_download_still_lands_in_the_models_folder(
    hub: LocalHub, homes: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home, _ = homes
    code, _, err = run_cli(capsys, "--download", f"hf:{REPO}:Q2_K")
    assert code == 0, err
    assert [p.name for p in _files_under(_models(home))] == ["gemma-3-270m-Q2_K.gguf", "mmproj-F16.gguf"]


@pytest.mark.parametrize(
    "name",
    ["", "/etc/x.gguf", "a/../../x.gguf", "..", "a//b.gguf", "./x.gguf", "a\\b.gguf", "C:x.gguf", "a\nb.gguf"],
)
def test_names_that_are_not_plain_relative_paths(name: str) -> None:
    assert name_problem(name)


@pytest.mark.parametrize("name", ["x.gguf", "Q4_K_M/model-00001-of-00002.gguf", "a..b.gguf", "mmproj-F16.gguf"])
def test_names_a_real_hub_lists(name: str) -> None:
    assert name_problem(name) == ""


@pytest.mark.parametrize("repo_id", ["..", "../../..", "a/b/c", "/a", "a/..", ".a/b", "a/b\n"])
def test_repository_ids_that_are_not_org_and_repo(repo_id: str) -> None:
    assert repo_id_problem(repo_id)

"""The tree stays `ruff` clean, `ruff format`ted and type-checked by mypy: checked in every test run."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff() -> str:
    found = Path(sys.executable).with_name("ruff")
    if found.exists():
        return str(found)
    path = shutil.which("ruff")
    if path is None:
        pytest.fail("ruff is not installed: pip install -e '.[test]'")
    return path


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]], ids=["check", "format"])
def test_ruff(command: list[str]) -> None:
    proc = subprocess.run([_ruff(), *command], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


def test_mypy() -> None:
    """mypy is clean on what pyproject.toml's [tool.mypy] names (the planner strictly, the app)."""
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: pip install -e '.[test]'")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

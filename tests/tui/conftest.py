"""What the app's tests share: a folder with one tiny model on a simulated 8 GiB GPU (a test that
needs another defines its own `shelf`), and the local hub of the remote-model tests for the hub view."""

import shutil
from pathlib import Path

import pytest

from tests.remote.conftest import hub, repo_files  # noqa: F401


@pytest.fixture
def shelf(tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A model of the user's own (so that the app opens on the picker), on a simulated 8 GiB GPU."""
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    root = tmp_path / "shelf"
    root.mkdir()
    shutil.copy(zoo["llama-f16"], root / "llama-f16.gguf")
    return root

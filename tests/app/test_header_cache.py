"""Parsed headers kept between runs: a second plan of the same file skips reading its header."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import planner.gguf
from app.caches.headers import load_anatomy_cached


def test_a_second_read_comes_from_the_cache_and_a_changed_file_is_read_again(
    zoo: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(zoo["llama-f16"].read_bytes())
    first = load_anatomy_cached(str(path))

    def no_reading(*_args, **_kwargs):
        raise AssertionError("the header was read again")

    monkeypatch.setattr(planner.gguf, "read_gguf", no_reading)
    again = load_anatomy_cached(str(path))
    assert again.architecture == first.architecture and again.n_layer == first.n_layer
    assert [t.name for t in again.input_tensors] == [t.name for t in first.input_tensors]

    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # the file changed
    with pytest.raises(AssertionError, match="read again"):
        load_anatomy_cached(str(path))


def test_a_damaged_cache_entry_is_read_past(zoo: dict[str, Path], tmp_path: Path) -> None:
    from app.caches.headers import _entry

    path = str(zoo["llama-f16"])
    load_anatomy_cached(path)
    entry = _entry(path)
    assert entry is not None and entry.exists()
    entry.write_bytes(b"not a pickle")
    assert load_anatomy_cached(path).architecture == "llama"


def test_a_name_that_is_not_utf8_is_read_and_kept(
    zoo: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Latin-1 file name (b'caf\\xe9.gguf') once ended `--plan` with "unexpected UnicodeEncodeError"."""
    path = tmp_path / os.fsdecode(b"caf\xe9.gguf")
    path.write_bytes(zoo["llama-f16"].read_bytes())
    first = load_anatomy_cached(str(path))
    monkeypatch.setattr(planner.gguf, "read_gguf", lambda *_a, **_k: pytest.fail("the header was read again"))
    assert load_anatomy_cached(str(path)) == first


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    """Reading a FIFO's header once waited for a writer forever: it is refused in words instead."""
    import threading

    from planner.errors import GGUFError

    fifo = tmp_path / "x.gguf"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            load_anatomy_cached(str(fifo))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let it go before failing
        reader.join(5)
        pytest.fail("reading the FIFO's header did not return")
    assert isinstance(outcome[0], GGUFError) and "not a regular file" in str(outcome[0])


def _vramchat(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, VRAMCHAT_DEVICES="8GiB,ram=32GiB", PYTHONPATH=str(Path(__file__).parents[2]))
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_plan_and_answer_with_a_name_that_is_not_utf8(zoo: dict[str, Path], tmp_path: Path) -> None:
    """`--plan` and `-p` of b'caf\\xe9.gguf' both ended in "unexpected UnicodeEncodeError ... (please report
    this)": the plan is printed, and llama.cpp loads the file by its bytes and answers."""
    path = tmp_path / os.fsdecode(b"caf\xe9.gguf")
    path.write_bytes(zoo["llama-f16"].read_bytes())
    plan = _vramchat("--plan", str(path))
    assert plan.returncode == 0, plan.stderr
    assert "Verdict: FITS" in plan.stdout and "please report" not in plan.stderr
    answer = _vramchat(str(path), "-p", "Hi", "-n", "4", "--temp", "0")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() and "please report" not in answer.stderr

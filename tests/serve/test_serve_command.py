"""`vramchat serve` as a user runs it: the plan on stderr first, one ready line with the base URL, one line
per request, and SIGTERM stops it (and its engine process) within seconds; an address other machines can
reach is refused without a key before anything loads."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

VRAMCHAT = str(Path(sys.executable).with_name("vramchat"))


def test_an_exposed_address_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VRAMCHAT_API_KEY", raising=False)
    proc = subprocess.run(
        [VRAMCHAT, "serve", "demo", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "--host 0.0.0.0 lets other machines reach the model: give it a key with --api-key" in proc.stderr
    assert "Host RAM" not in proc.stderr  # refused before planning


def test_other_modes_are_refused_in_words() -> None:
    proc = subprocess.run([VRAMCHAT, "serve", "demo", "-p", "hi"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "with serve, send requests to the server" in proc.stderr


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--plan"], "--plan is a mode of its own"),
        (["--json"], "--json is a mode of its own"),
        (["--verbose"], "--verbose answer one question"),
        (["--image", "cat.png"], "--image, --audio and --verbose answer one question"),
        (["--models-dir", "."], "--models-dir is where the picker and --list look"),
    ],
)
def test_flags_serve_does_not_show_are_refused_in_words(words: list[str], said: str) -> None:
    """A flag of the app's that serve does not take is refused before anything is planned, not dropped (the
    server would run without what it asked). A process with a timeout: a flag let through serves forever."""
    proc = subprocess.run(
        [VRAMCHAT, "serve", "demo", "--port", "0", *words],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and said in proc.stderr
    assert "Host RAM" not in proc.stderr


def test_serve_help_shows_what_serve_takes(capsys: pytest.CaptureFixture[str]) -> None:
    """`vramchat serve --help` lists the server's flags, its sampling defaults and the plan knobs, not the app's
    modes or -p's flags it refuses; `vramchat --help` names the serve commands."""
    from app import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve", "--help"])
    assert exit_.value.code == 0
    help_text, epilog = capsys.readouterr().out.split("Sizes accept binary units")
    assert "vramchat --help shows the app's own command line" in " ".join(epilog.split())
    for shown in ("--host ADDR", "--api-key KEY", "sampling (the server's defaults", "--temp T", "--ctx N", "--ngl N"):
        assert shown in help_text, shown
    for hidden in ("--plan", "--list", "--quants", "--download", "--continue", "--verify", "-p TEXT", "--verbose"):
        assert hidden not in help_text, hidden
    assert "with -p" not in help_text
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    app_help = " ".join(capsys.readouterr().out.split())
    assert "vramchat serve MODEL serves the planned model behind an OpenAI-compatible API" in app_help
    assert "vramchat serve-rpc" in app_help and "seed (0 to 4294967295;" in app_help


@pytest.mark.llama
def test_serve_demo_answers_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [VRAMCHAT, "serve", "demo", "--port", "0", "--ctx", "2048"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.startswith("vramchat: serving gemma-3-270m-q4_k_m at http://127.0.0.1:"), ready
        url = ready.split(" at ", 1)[1].split()[0]
        assert url.endswith("/v1")
        body = json.dumps({"model": "demo", "prompt": "The capital of France is", "max_tokens": 3}).encode()
        request = urllib.request.Request(f"{url}/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            assert json.loads(answer.read())["usage"]["completion_tokens"] == 3
        line = proc.stdout.readline()
        assert "200" in line and "/v1/completions" in line and "→ 3" in line and "tokens" in line, line
        engines = [
            c for c in psutil.Process(proc.pid).children(recursive=True) if "app.engine.child" in " ".join(c.cmdline())
        ]
        assert engines
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
        assert code == 0 and time.monotonic() - started < 15
        assert not any(e.is_running() and e.status() != psutil.STATUS_ZOMBIE for e in engines)
        err = proc.stderr.read() if proc.stderr else ""
        assert err.index("Host RAM") < err.index("vramchat: stopped")  # the plan first
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

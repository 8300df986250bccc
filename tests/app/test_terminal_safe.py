"""Text from outside never commands the terminal: a model file's name, a file's name, a chat template's words
and a model's reply reach stdout and stderr with every control character shown as an escape (`\\x1b`), never
as the byte a terminal obeys (ESC ] 52 writes the clipboard, ESC [ 31 m colours the screen)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.terminal_text import SafeStream, is_terminal_safe, terminal_safe, write_control
from tests.support.tiny import ENDLESS, TinySpec, write_tiny_model

ROOT = Path(__file__).resolve().parents[2]
CLIPBOARD = "[/]evil\x1b]52;c;aGk=\x07"  # an OSC 52 clipboard write of "hi", behind a Rich markup closer
RED = "red\x1b[31mname"
# a template that stops with words of its model's making: the prompt falls back, and says why
RAISING_TEMPLATE = "{{ raise_exception('broken \x1b]52;c;aGk=\x07 template') }}"


def _run(*args: str, home: Path) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, VRAMCHAT_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, cwd=ROOT, env=env, timeout=300)


def _no_control_bytes(out: bytes) -> None:
    for byte, name in ((b"\x1b", "ESC"), (b"\x07", "BEL"), (b"\x9b", "C1 CSI")):
        assert byte not in out, f"{name} reached the terminal: {out[max(out.find(byte) - 40, 0) :][:120]!r}"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_model(folder / "model.gguf", TinySpec(name=CLIPBOARD))
    write_tiny_model(folder / f"{RED}.gguf", TinySpec(name="plain"))
    return folder


def test_every_control_character_is_shown_as_an_escape() -> None:
    assert terminal_safe(CLIPBOARD) == "[/]evil\\x1b]52;c;aGk=\\x07"
    assert terminal_safe("a\u009b2Jb") == "a\\x9b2Jb"  # C1 CSI: ESC [ to some terminals
    assert terminal_safe("file\u202egnp.exe") == "file\\u202egnp.exe"  # a right-to-left override
    assert terminal_safe("lone \udcff byte") == "lone \\udcff byte"  # undecodable: an encoder would refuse it
    assert terminal_safe("a\nb\tc") == "a\\x0ab\\x09c"  # a name stays on its line
    assert terminal_safe("a\nb\tc\r", multiline=True) == "a\nb\tc\\x0d"  # a reply keeps its lines
    assert terminal_safe("Gemma 3 · 日本語 🙂 é") == "Gemma 3 · 日本語 🙂 é"
    assert is_terminal_safe("plain") and not is_terminal_safe(RED)
    # ASCII text and text with other characters take two ways through: the same escapes either way
    assert terminal_safe("\x1b[31m\x7f") == "\\x1b[31m\\x7f"
    assert terminal_safe("é\x1b[31m\x7f\u2066") == "é\\x1b[31m\\x7f\\u2066"
    assert terminal_safe("é\x1b\n", multiline=True) == "é\\x1b\n" and is_terminal_safe("é\n", multiline=True)


def test_a_guarded_stream_writes_vramchats_own_sequences_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    with open(path, "w", encoding="utf-8") as raw:
        stream = SafeStream(raw)
        stream.write(f"name: {CLIPBOARD}\n")
        write_control(stream, "\r\x1b[K")  # a progress line redrawn: vramchat's own
        stream.writelines([RED, "\n"])
    assert path.read_bytes() == b"name: [/]evil\\x1b]52;c;aGk=\\x07\n\r\x1b[Kred\\x1b[31mname\n"


def test_list_and_plan_write_no_control_byte_of_a_models_making(hostile: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    listed = _run("--list", "--models-dir", str(hostile), home=home)
    assert listed.returncode == 0, listed.stderr
    _no_control_bytes(listed.stdout + listed.stderr)
    table = listed.stdout.decode()
    assert "[/]evil\\x1b]52;c;aGk=\\x07" in table and "red\\x1b[31mname.gguf" in table  # seen, and visibly odd
    # the columns line up: the path column starts at the same place on every row
    rows = [line for line in table.splitlines() if str(hostile) in line]
    assert len(rows) == 2
    assert len({line.index(str(hostile)) for line in rows}) == 1, table

    for model in (hostile / "model.gguf", hostile / f"{RED}.gguf"):
        planned = _run("--plan", str(model), home=home)
        assert planned.returncode == 0, planned.stderr
        _no_control_bytes(planned.stdout + planned.stderr)
    as_json = _run("--plan", str(hostile / "model.gguf"), "--json", home=home)
    _no_control_bytes(as_json.stdout)  # json escapes it: \u001b
    assert json.loads(as_json.stdout)["model"]["name"] == CLIPBOARD  # the file's own name, exactly

    missing = _run("--plan", str(hostile / f"gone{RED}.gguf"), home=home)
    assert missing.returncode == 1
    _no_control_bytes(missing.stdout + missing.stderr)
    assert b"gonered\\x1b[31mname.gguf" in missing.stderr


@pytest.mark.llama
def test_a_reply_and_a_templates_words_reach_stdout_and_stderr_made_safe(tmp_path: Path) -> None:
    # the endless tiny model's vocabulary has control characters: its greedy reply starts with BEL
    model = write_tiny_model(tmp_path / "endless.gguf", ENDLESS)
    answered = _run(str(model), "-p", "Hello", "-n", "24", "--temp", "0", home=tmp_path / "home")
    assert answered.returncode == 0, answered.stderr
    _no_control_bytes(answered.stdout + answered.stderr)
    assert b"\\x07" in answered.stdout  # the reply's BEL, shown

    refusing = write_tiny_model(
        tmp_path / "refusing.gguf",
        TinySpec(**{**ENDLESS.__dict__, "extra_kv": {"tokenizer.chat_template": RAISING_TEMPLATE}}),
    )
    refused = _run(str(refusing), "-p", "Hello", "-n", "4", home=tmp_path / "home")
    assert refused.returncode == 4  # the template's refusal is the load's failure, said in words
    _no_control_bytes(refused.stdout + refused.stderr)
    assert b"broken \\x1b]52;c;aGk=\\x07 template" in refused.stderr

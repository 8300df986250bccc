"""Every bad input we try, and what the user sees: regenerates docs/bad_inputs.md.

    python bench/bad_inputs.py [--out docs/bad_inputs.md]

Each case runs for real: the command line as a subprocess (exit status and the last
line it prints), the app headless through Textual's pilot (the notifications, the
badge and the plan panel a user would read), and the out-of-memory loads in a child
process whose address space is capped, so that llama.cpp itself refuses the memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.tiny import TinySpec, write_tiny_model  # noqa: E402

VRAMCHAT = Path(sys.executable).with_name("vramchat")
# the section bench/hostile_inputs.py writes (issue 36's hostile inputs): kept as it is here
HOSTILE_BEGIN, HOSTILE_END = "<!-- hostile:begin -->", "<!-- hostile:end -->"


@dataclass
class Row:
    case: str
    tried: str
    sees: str
    status: str = ""


def _shelf(root: Path) -> dict[str, Path]:
    """The files the cases use."""
    root.mkdir(parents=True, exist_ok=True)
    ok = write_tiny_model(root / "tiny.gguf", TinySpec("llama", name="Tiny llama"))
    data = ok.read_bytes()
    files = {"ok": ok}
    files["truncated"] = root / "half-downloaded.gguf"
    files["truncated"].write_bytes(data[: len(data) // 3])
    files["header_only"] = root / "header-cut.gguf"
    files["header_only"].write_bytes(data[:1000])
    files["text"] = root / "notes.gguf"
    files["text"].write_text("these are my notes, not a model\n")
    files["empty"] = root / "empty.gguf"
    files["empty"].write_bytes(b"")
    files["version"] = root / "future.gguf"
    files["version"].write_bytes(b"GGUF" + struct.pack("<I", 99) + data[8:])
    files["huge_count"] = root / "hostile-count.gguf"
    files["huge_count"].write_bytes(data[:8] + struct.pack("<Q", 1 << 60) + data[16:])
    files["folder"] = root / "folder.gguf"
    files["folder"].mkdir(exist_ok=True)
    files["unknown_arch"] = write_tiny_model(root / "strange.gguf", TinySpec("zebra", name="Strange"))
    files["no_chat"] = write_tiny_model(root / "dream.gguf", TinySpec("dream", name="Tiny Dream"))
    return files


def command_line_rows(files: dict[str, Path], home: Path) -> list[Row]:
    name = {k: p.name for k, p in files.items()}
    cases: list[tuple[str, list[str]]] = [
        ("a file that does not exist", ["--plan", "missing.gguf"]),
        ("a folder instead of a file", ["--plan", name["folder"]]),
        ("a folder given as the model to chat with", [name["folder"]]),
        ("a text file named .gguf", ["--plan", name["text"]]),
        ("an empty file", ["--plan", name["empty"]]),
        ("a download cut in the tensor data", ["--plan", name["truncated"]]),
        ("a download cut in the header", ["--plan", name["header_only"]]),
        ("a GGUF version from the future", ["--plan", name["version"]]),
        ("a tensor count of 2^60", ["--plan", name["huge_count"]]),
        ("an architecture the planner does not know", ["--plan", name["unknown_arch"]]),
        ("a non-GGUF file as the model to chat with", [name["text"]]),
        ("a diffusion model (no chat) as the model to chat with", [name["no_chat"]]),
        ("a non-GGUF file as the projector", ["--plan", name["ok"], "--mmproj", name["text"]]),
        ("--ctx -1", ["--plan", name["ok"], "--ctx", "-1"]),
        ("--ctx 99999999999", ["--plan", name["ok"], "--ctx", "99999999999"]),
        ("--ctx 12 (below llama.cpp's minimum)", ["--plan", name["ok"], "--ctx", "12"]),
        ("--vram 0", ["--plan", name["ok"], "--vram", "0"]),
        ("--vram -3GiB", ["--plan", name["ok"], "--vram", "-3GiB"]),
        ("--vram 8 parsecs", ["--plan", name["ok"], "--vram", "8parsecs"]),
        ("--ram 1KiB (nothing fits)", ["--plan", name["ok"], "--ram", "1KiB"]),
        ("--ngl -5", ["--plan", name["ok"], "--vram", "8GiB", "--ngl", "-5"]),
        ("--ctk q9_9", ["--plan", name["ok"], "--ctk", "q9_9"]),
        ("--ctv q8_0 without flash attention", ["--plan", name["ok"], "--ctv", "q8_0", "--fa", "off"]),
        ("--ubatch 0", ["--plan", name["ok"], "--ubatch", "0"]),
        ("--parallel 0", ["--plan", name["ok"], "--parallel", "0"]),
        ("--n-cpu-moe -1", ["--plan", name["ok"], "--n-cpu-moe", "-1"]),
        ("--plan without a model", ["--plan"]),
        ("--json alone", ["--json"]),
        ("an unknown flag", ["--bogus"]),
        ("--models-dir that does not exist", ["--list", "--models-dir", "no-such-folder"]),
        ("VRAMCHAT_DEVICES=lots", ["--plan", name["ok"]]),
    ]
    rows = []
    cwd = os.getcwd()
    os.chdir(files["ok"].parent)
    try:
        for case, args in cases:
            if case.startswith("VRAMCHAT_DEVICES"):
                os.environ["VRAMCHAT_DEVICES"] = "lots"
                env_backup = True
            else:
                env_backup = False
            try:
                env = dict(os.environ, VRAMCHAT_HOME=str(home))
                if not env_backup:
                    env.pop("VRAMCHAT_DEVICES", None)
                proc = subprocess.run(
                    [str(VRAMCHAT), *args],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=120,
                    stdin=subprocess.DEVNULL,
                )
            finally:
                os.environ.pop("VRAMCHAT_DEVICES", None)
            rows.append(Row(case, "vramchat " + " ".join(args), _what_it_says(proc), str(proc.returncode)))
    finally:
        os.chdir(cwd)
    return rows


def remote_rows(files: dict[str, Path], base: Path) -> list[Row]:
    """The same bad files read over HTTP (the remote reader keeps every check), and what only a remote
    model can get wrong: a local hub (tests/support/hub_server.py) as HF_ENDPOINT, the real client."""
    from tests.support.hub_server import LocalHub

    home = base / "remote-home"
    rows = []
    with LocalHub() as hub:
        ok = files["ok"]
        hub.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": ok})
        hub.add_repo("acme/gated-GGUF", {"gated-Q8_0.gguf": files["unknown_arch"]}, gated=True)
        url = {key: hub.add_file(path.name, path) for key, path in files.items() if path.is_file()}
        # a vocabulary of 12 million empty strings: a legal header of 96 MB, larger than any real one
        key = b"tokenizer.ggml.tokens"
        huge = base / "huge-header.gguf"
        with huge.open("wb") as handle:
            handle.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key)
            handle.write(struct.pack("<IIQ", 9, 8, 12_000_000))
            handle.truncate(8 * 12_000_000 + 4096)
        cases: list[tuple[str, list[str], dict[str, str]]] = [
            ("a text file named .gguf, at an URL", ["--plan", url["text"]], {}),
            ("an empty file at an URL", ["--plan", url["empty"]], {}),
            ("a download cut in the tensor data, at an URL", ["--plan", url["truncated"]], {}),
            ("a download cut in the header, at an URL", ["--plan", url["header_only"]], {}),
            ("a GGUF version from the future, at an URL", ["--plan", url["version"]], {}),
            ("a tensor count of 2^60, at an URL", ["--plan", url["huge_count"]], {}),
            ("a header larger than any real one (96 MB)", ["--plan", hub.add_file(huge.name, huge)], {}),
            ("an URL the server does not have", ["--plan", f"{hub.url}/files/gone.gguf"], {}),
            ("a server without range requests", ["--plan", url["ok"]], {"mode": "no-range"}),
            ("no network (nothing answers)", ["--plan", "http://127.0.0.1:9/model.gguf"], {}),
            ("a repo that does not exist", ["--plan", "hf:acme/no-such-repo:Q4_K_M"], {}),
            ("a quant the repo does not have", ["--plan", "hf:acme/tiny-GGUF:Q4_K_M"], {}),
            ("a file the repo does not have", ["--plan", "acme/tiny-GGUF/tiny-Q2_K.gguf"], {}),
            ("a gated repo without a token", ["--plan", "hf:acme/gated-GGUF:Q8_0"], {}),
            ("a gated repo, a token without access", ["--plan", "hf:acme/gated-GGUF:Q8_0"], {"HF_TOKEN": "hf_x"}),
            ("HF_HUB_OFFLINE=1, a repo never seen", ["--quants", "acme/never-seen-GGUF"], {"HF_HUB_OFFLINE": "1"}),
            ("a remote model given to chat", ["hf:acme/tiny-GGUF:Q8_0", "-p", "hi"], {}),
            (
                "a download cut half-way (the connection dropped)",
                ["--download", "hf:acme/tiny-GGUF:Q8_0"],
                {"drop": "half"},
            ),
        ]
        for case, args, extra in cases:
            hub.mode = extra.get("mode", "normal")
            hub.drop_at = ok.stat().st_size // 2 if extra.get("drop") else None
            env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VRAMCHAT_"))}
            env.update(VRAMCHAT_HOME=str(home), HF_ENDPOINT=hub.url, HF_HOME=str(base / "hf-home"))
            env.update({k: v for k, v in extra.items() if k.startswith("HF_")})
            proc = subprocess.run(
                [str(VRAMCHAT), *args], capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL
            )
            sees = _what_it_says(proc)
            if extra.get("drop") and proc.returncode == 0:
                sees = f"resumed from the partial file, checked: {proc.stdout.splitlines()[0]}"
            host = hub.url.removeprefix("http://")
            rows.append(
                Row(
                    case,
                    "vramchat " + " ".join(args).replace(host, "HOST"),
                    sees.replace(host, "HOST"),
                    str(proc.returncode),
                )
            )
    return rows


def _what_it_says(proc: subprocess.CompletedProcess[str]) -> str:
    verdict = [ln for ln in proc.stdout.splitlines() if ln.startswith("Verdict:")]
    if verdict:
        lines = proc.stdout.splitlines()
        why = [ln.strip() for ln in lines if ln.strip().startswith("- ")]
        text = verdict[0] + (f" ({why[0][2:]})" if why else "")
        if "Estimates (not derived exactly)" in lines:
            first = lines[lines.index("Estimates (not derived exactly)") + 1].strip()
            text += f"; under \u201cEstimates\u201d: {first[2:]}"
        return text
    lines = [ln for ln in proc.stderr.strip().splitlines() if not ln.startswith(("usage:", " "))]
    return lines[-1] if lines else (proc.stdout.strip().splitlines() or ["(nothing)"])[-1]


async def _app_sees(home: Path, folder: Path, select: str | None = None) -> tuple[list[str], str, str]:
    """(notifications, the selected row's badge, the plan panel's verdict line)."""
    from textual.widgets import DataTable

    from app.tui.app import AppOptions, VramchatApp
    from app.tui.screens.picker import PickerScreen

    os.environ["VRAMCHAT_HOME"] = str(home)
    app = VramchatApp(AppOptions(models_dirs=[str(folder)], include_demo=False))
    badge = verdict = ""
    async with app.run_test(size=(160, 45)) as pilot:
        for _ in range(400):
            screen = app.screen
            if isinstance(screen, PickerScreen) and not screen._scanning and screen.plan_state in ("ready", "error"):
                break
            await pilot.pause(0.05)
        screen = app.screen
        if isinstance(screen, PickerScreen) and select is not None:
            table = screen.query_one("#models", DataTable)
            for index, key in enumerate(table.rows):
                if Path(str(key.value)).name == select:
                    table.move_cursor(row=index)
                    badge = str(table.get_cell(key, "fit"))
            for _ in range(100):
                await pilot.pause(0.05)
                if screen.plan_state in ("ready", "error"):
                    break
            verdict = str(screen.query_one("#plan-verdict").render()).splitlines()[0]
        notes = [" ".join(str(n.message).split()) for n in app._notifications]
    return notes, badge, verdict


def app_rows(files: dict[str, Path], base: Path) -> list[Row]:
    rows: list[Row] = []

    def fresh_home(name: str) -> Path:
        home = base / name
        home.mkdir(parents=True)
        return home

    def shelf_with(*keys: str) -> Path:
        folder = base / ("shelf-" + "-".join(keys))
        folder.mkdir()
        for key in keys:
            (folder / files[key].name).symlink_to(files[key])
        return folder

    def run(coro) -> tuple[list[str], str, str]:
        return asyncio.run(coro)

    for key, case in (
        ("text", "a text file named .gguf in a models folder"),
        ("truncated", "a half-downloaded GGUF in a models folder"),
        ("version", "a GGUF from a newer format version in a models folder"),
    ):
        notes, badge, verdict = run(_app_sees(fresh_home(f"h-{key}"), shelf_with("ok", key), files[key].name))
        rows.append(Row(case, "the model picker", f"listed with the badge \u201c{badge}\u201d; selected: {verdict}"))

    home = fresh_home("settings-garbage")
    (home / "config").mkdir()
    (home / "config" / "settings.json").write_text("{ not json")
    notes, _, _ = run(_app_sees(home, shelf_with("empty")))
    rows.append(Row("a settings file that is not JSON", "vramchat", _first(notes, "settings")))

    home = fresh_home("settings-values")
    (home / "config").mkdir()
    (home / "config" / "settings.json").write_text(json.dumps({"temperature": "hot", "max_tokens": -4}))
    notes, _, _ = run(_app_sees(home, base / "shelf-empty"))
    rows.append(Row("settings with absurd values", "vramchat", _first(notes, "bad values")))

    blocked = base / "home-is-a-file"
    blocked.write_text("a file where vramchat's folders should be")
    notes, _, _ = run(_app_sees(blocked, base / "shelf-empty"))
    rows.append(
        Row("config, data and cache folders that cannot be created", "vramchat", " / ".join(notes) or "(nothing)")
    )

    home = fresh_home("db-damaged")
    (home / "data").mkdir()
    (home / "data" / "conversations.sqlite3").write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    notes, _, _ = run(_app_sees(home, base / "shelf-empty"))
    rows.append(Row("a damaged conversation database", "vramchat", _first(notes, "damaged")))

    home = fresh_home("db-newer")
    (home / "data").mkdir()
    db = sqlite3.connect(home / "data" / "conversations.sqlite3")
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    notes, _, _ = run(_app_sees(home, base / "shelf-empty"))
    rows.append(Row("a conversation database from a newer vramchat", "vramchat", _first(notes, "newer")))

    home = fresh_home("db-locked")
    (home / "data").mkdir()
    from app.store import Store

    Store(home / "data" / "conversations.sqlite3").close()
    holder = sqlite3.connect(home / "data" / "conversations.sqlite3", isolation_level=None)
    holder.execute("PRAGMA journal_mode = DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        notes, _, _ = run(_app_sees(home, base / "shelf-empty"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    rows.append(Row("a conversation database another program holds locked", "vramchat", _first(notes, "locked")))
    return rows


def _first(notes: list[str], word: str) -> str:
    return next((n for n in notes if word in n), " / ".join(notes) or "(nothing)")


def load_rows(base: Path) -> list[Row]:
    """Loads that run out of memory in real llama.cpp (a capped address space in a child process)."""
    model = write_tiny_model(
        base / "big-kv.gguf", TinySpec("llama", n_embd=1024, n_head=8, n_head_kv=8, n_ff=256, n_ctx_train=131072)
    )
    child = ROOT / "tests" / "support" / "oom_child.py"
    rows = []
    for headroom, case in (
        (800, "a load that runs out of memory (the plan's 1 GiB KV cache cannot be allocated)"),
        (60, "a load that cannot succeed even with smaller plans"),
    ):
        proc = subprocess.run(
            [sys.executable, str(child), str(model), "65536", str(headroom)],
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ, MALLOC_ARENA_MAX="1"),
        )
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        steps = "; ".join(", ".join(r["changes"]) for r in out["retries"])
        if out["loaded"]:
            sees = (
                f"\u201cNot enough memory\u201d: {out['retries'][0]['why'].split(':')[0]}; trying a smaller "
                f"plan: {steps}. Then: loaded with a smaller plan than the one chosen: "
                f"{'; '.join(out['changes'])}."
            )
        else:
            sees = (
                f"retried: {steps}; then a dialog \u201cThe model did not load\u201d: "
                f"{out['error'][:160]}… and back to the model list"
            )
        rows.append(Row(case, "loading in the app", sees))
    rows.append(
        Row(
            "out of memory while writing a reply",
            "chatting",
            "\u201cOut of memory\u201d: what was written is kept, the model is reloaded with a smaller plan "
            "(same rule), and the chat carries on (tests/tui/test_tui_pilot.py)",
        )
    )
    rows.append(
        Row(
            "SIGKILL during a streamed reply",
            "restarting the app",
            "\u201c1 reply was cut short when vramchat last stopped; what was written is kept.\u201d; the "
            "reply shows \u201ccut short: the app stopped\u201d (tests/tui/test_crash_kill.py)",
        )
    )
    return rows


def _table(rows: list[Row], with_status: bool) -> str:
    head = "| input | where | what the user sees |" + (" exit |" if with_status else "")
    sep = "|---|---|---|" + ("---|" if with_status else "")
    out = [head, sep]
    for r in rows:
        cells = [r.case, f"`{r.tried}`" if r.tried.startswith("vramchat") else r.tried, r.sees.replace("|", "\\|")]
        if with_status:
            cells.append(r.status)
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "docs" / "bad_inputs.md"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vramchat-bad-") as tmp:
        base = Path(tmp)
        files = _shelf(base / "files")
        sections: list[tuple[str, Callable[[], list[Row]], bool]] = [
            ("Command line", lambda: command_line_rows(files, base / "cli-home"), True),
            ("The app", lambda: app_rows(files, base / "app"), False),
            ("Loads and crashes", lambda: load_rows(base), False),
            ("Remote models (URLs and the Hugging Face hub)", lambda: remote_rows(files, base), True),
        ]
        parts = [
            "# Bad input: what the user sees",
            "",
            "Every row was produced by running the input for real: `python bench/bad_inputs.py` regenerates "
            "this file. Exit status: 0 the plan fits, 3 it does not, 2 a usage error, 1 a bad or missing file. "
            "Hostile headers beyond these are fuzzed (`bench/fuzz_gguf.py`, `tests/planner/test_fuzz_gguf.py`).",
            "",
        ]
        for title, make, with_status in sections:
            rows = make()
            for row in rows:  # the temporary folder's name says nothing to a reader
                row.sees = row.sees.replace(str(base), "<tmp>")
            print(f"{title}: {len(rows)} cases")
            parts += [f"## {title}", "", _table(rows, with_status), ""]
    from bench.sections import kept_section

    hostile = kept_section(Path(args.out), HOSTILE_BEGIN, HOSTILE_END)
    if hostile:
        parts += [hostile, ""]
    Path(args.out).write_text("\n".join(parts), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

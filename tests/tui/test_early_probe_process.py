"""The probe begun at start runs in a process of its own on Linux: the app gets the report (or the error the
probe raised) without loading a probe itself, and a probe process that dies without a report has the
probe run in the app's process instead. Each case runs in a fresh interpreter, as the app starts: the
test process has threads of its own, and a fork is only made where no other thread runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.children import child_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the probe process is Linux's")

SCRIPT = """
import json, os, sys
from app.tui import early_probe
from app.tui.services import AppOptions, probe_for

app_pid = os.getpid()
how = sys.argv[1]


def probe():
    if os.getpid() != app_pid:
        with open(os.environ["PROBED_IN"], "a") as mark:
            mark.write(f"{os.getpid()}\\n")
        if how == "dies":
            os._exit(3)
        if how == "crashes":
            import signal
            os.kill(os.getpid(), signal.SIGSEGV)
    if how == "malformed":
        return probe_for(AppOptions(vram="eight gigabytes"))
    if how == "machine":
        return probe_for(AppOptions())
    return probe_for(AppOptions(vram="8GiB", ram="16GiB"))


early_probe.begin(probe)
try:
    report = early_probe.take().result(timeout=120)
except ValueError as exc:
    answer = {"error": str(exc)}
else:
    answer = {"gpus": [g.total for g in report.gpus], "host": report.host.total,
              "names": [g.name for g in report.gpus]}
answer["loaded"] = sorted(m for m in sys.modules if m.startswith("app.devices"))
answer["app_pid"] = app_pid
print(json.dumps(answer))
"""


def _start(how: str, tmp_path: Path) -> tuple[dict, list[int]]:
    marks = tmp_path / "probed-in.txt"
    env = child_env(VRAMCHAT_HOME=str(tmp_path / "home"), PROBED_IN=str(marks))
    env.pop("VRAMCHAT_DEVICES", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, how], capture_output=True, text=True, env=env, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.splitlines()[-1])
    pids = [int(line) for line in marks.read_text().split()] if marks.exists() else []
    return answer, pids


def test_the_report_comes_from_a_probe_process_and_the_app_loads_no_probe(tmp_path: Path) -> None:
    answer, pids = _start("simulated", tmp_path)
    assert answer["gpus"] == [8 * 2**30] and answer["host"] == 16 * 2**30
    assert len(pids) == 1 and pids[0] != answer["app_pid"]  # probed in another process
    # the app read the report with its shape alone: no probe module, so no ctypes, NVML nor library lookup
    assert "app.devices.machine" not in answer["loaded"] and "app.devices.ggml" not in answer["loaded"]


def test_the_probe_process_reports_this_machine_as_a_probe_here_does(tmp_path: Path) -> None:
    from app.devices import probe_devices

    answer, pids = _start("machine", tmp_path)
    here = probe_devices()
    assert len(pids) == 1 and answer["host"] == here.host.total
    assert answer["names"] == [g.name for g in here.gpus]


def test_the_error_the_probe_process_met_is_the_app_s(tmp_path: Path) -> None:
    answer, pids = _start("malformed", tmp_path)
    assert len(pids) == 1  # raised there, said here
    assert "eight gigabytes" in answer["error"]


@pytest.mark.parametrize("how", ["dies", "crashes"])
def test_a_probe_process_that_ends_without_a_report_has_the_probe_run_in_the_app(how: str, tmp_path: Path) -> None:
    answer, pids = _start(how, tmp_path)
    assert len(pids) == 1 and pids[0] != answer["app_pid"]
    assert answer["gpus"] == [8 * 2**30]
    assert "app.devices.machine" in answer["loaded"]  # probed again, in the app's own process

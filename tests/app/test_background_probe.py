"""The speed probe is never on a plan's path: a plan in a home without figures says "measuring…" at once and
starts the probe in the background (its own process, the lowest priority, one at a time per home), and the
next plan quotes what it kept. On a busy machine each plan used to time the CPU again, for 2-9 s, and throw the
timing away."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.speed import background
from app.speed import machine as speed_machine
from tests.support.speed import quiet_figures

ROOT = Path(__file__).resolve().parents[2]

REAL_START = speed_machine.start_background_probe  # tests/conftest.py runs the probe in place instead


@pytest.fixture
def no_figures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A home without this machine's figures, the real background probe running a stand-in probe module."""
    (speed_machine.speed_folder() / speed_machine.MACHINE_FILE).unlink()
    speed_machine.forget()
    monkeypatch.setattr(speed_machine, "start_background_probe", REAL_START)
    monkeypatch.delenv(speed_machine.PROBE_SWITCH, raising=False)
    monkeypatch.setattr(speed_machine, "PROBE_MODULE", "tests.support.fake_probe")
    log = tmp_path / "probes.log"
    monkeypatch.setenv("FAKE_PROBE_LOG", str(log))
    monkeypatch.setenv("FAKE_PROBE_SECONDS", "1.5")
    return log


def _wait(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.05)


def test_a_plan_never_waits_for_the_probe_and_the_next_plan_quotes_it(no_figures: Path) -> None:
    started = time.monotonic()
    cpu, why = speed_machine.cpu_speed()
    speed_machine.forget()  # another plan, in another process, while the probe runs
    again, _ = speed_machine.cpu_speed()
    asked = time.monotonic() - started
    assert cpu is None and again is None and speed_machine.waiting(why) and "in the background" in why
    assert asked < 1.0, f"the plans waited {asked:.2f} s"  # the probe takes 1.5 s: neither waited for it
    kept = speed_machine.speed_folder() / speed_machine.MACHINE_FILE
    _wait(kept.exists, 60, "the background probe to keep its figures")
    runs = no_figures.read_text().splitlines()
    assert len(runs) == 1, runs  # two plans asked: one probe ran
    assert runs[0].endswith("nice 19")  # at the lowest priority
    if Path("/proc/self/autogroup").exists():  # and its session's scheduling group too, or nice 19 weighs nothing
        assert " group 19 " in runs[0], runs
    speed_machine.forget()
    cpu, source = speed_machine.cpu_speed()
    assert cpu is not None and "measured on this machine" in source  # the next plan quotes it
    _wait(lambda: not speed_machine.probe_running(speed_machine.speed_folder()), 30, "the background probe to end")


def test_the_probe_switched_off_is_never_started(no_figures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(speed_machine.PROBE_SWITCH, "off")
    cpu, why = speed_machine.cpu_speed()
    assert cpu is None and not speed_machine.waiting(why) and "VRAMCHAT_SPEED_PROBE=off" in why
    time.sleep(0.3)
    assert not no_figures.exists() and not speed_machine.probe_running(speed_machine.speed_folder())


def test_a_busy_machine_is_probed_again_until_a_probe_is_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    (speed_machine.speed_folder() / speed_machine.MACHINE_FILE).unlink()
    speed_machine.forget()
    busy = [quiet_figures() | {"load": 0.9}, quiet_figures() | {"load": 0.8}]
    answers = [*busy, quiet_figures(threads=speed_machine.machine_key()["threads"])]
    monkeypatch.setattr(speed_machine, "run_probe", lambda module=None: answers.pop(0))
    monkeypatch.setattr(speed_machine, "RETRY_SECONDS", 0.05)
    # the child's loop, run here: without lowering this test session's priority (and its session's group)
    monkeypatch.setattr(background, "lowest_priority", lambda: None)
    assert background.run(speed_machine.speed_folder(), speed_machine.PROBE_MODULE) == 0
    assert not answers  # three tries: two disturbed and dropped, the third kept
    speed_machine.forget()
    assert speed_machine.cpu_speed(measure=False)[0] is not None


def test_the_probe_lowers_its_sessions_group_only_when_it_leads_that_session() -> None:
    """Run outside a session of its own (by hand, or a test), the probe must not lower the user's whole session:
    Linux's autogroup nice is the session's, every program the user runs there would share it."""
    code = (
        "import os\n"
        "from app.speed.background import lowest_priority\n"
        "lowest_priority()\n"
        "group = open('/proc/self/autogroup').read().split()\n"
        "print(os.nice(0), group[-1] if group else 'none')\n"
    )
    if not Path("/proc/self/autogroup").exists():
        pytest.skip("no scheduling groups by session on this kernel")
    # "/autogroup-N nice K", or nothing for a task in the root group (a container's or a service's first session)
    group = Path("/proc/self/autogroup").read_text().split()
    before = group[-1] if group else "none"
    inside = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.split() == ["19", before]  # its own nice only: the group it shares is left as it was
    leader = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, start_new_session=True
    )
    assert leader.returncode == 0, leader.stderr
    assert leader.stdout.split() == ["19", "19"]  # its own session, as the launcher starts it: the group too

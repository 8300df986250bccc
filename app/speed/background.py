"""The speed probe in the background: a process of its own, at the lowest priority, one at a time per home.

A plan never waits for the probe (it can take seconds, or keep being disturbed on a busy machine, where
each plan used to time the CPU again and throw the timing away). app.speed.machine.start_background_probe
launches this module detached from the command or app that asked. It takes the home's lock (an flock, let
go when the process ends however it ends), so that a second one exits at once, and probes until
app.speed.machine keeps figures it trusts (or a reason the CPU cannot be measured), waiting RETRY_SECONDS
after a disturbed try, for at most GIVE_UP_SECONDS. The next plan, in any process, reads what it kept.

    python -m app.speed.background PROBE_MODULE   (the home: VRAMCHAT_HOME, as for the command that asked)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from pathlib import Path

GIVE_UP_SECONDS = 30 * 60.0  # a machine busy for half an hour: the next plan starts another


def run(folder: Path, module: str) -> int:
    """Probe until figures are kept (0), or give up (1); 0 at once where another probe holds the lock."""
    from app.speed import machine

    lowest_priority()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / machine.LOCK_FILE, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # never two at once for one home
        deadline = time.monotonic() + GIVE_UP_SECONDS
        while True:
            cpu, why = machine.measure_and_keep(module)
            if cpu is not None or not machine.waiting(why):
                return 0  # kept: figures, or why this CPU cannot be measured
            if time.monotonic() + machine.RETRY_SECONDS > deadline:
                return 1
            time.sleep(machine.RETRY_SECONDS)


def lowest_priority() -> None:
    """Nice 19, and on Linux the same for this process's scheduling group: the launcher starts it in a session
    of its own, and where the kernel groups tasks by session (autogroup, on by default on desktop Linux) a nice
    value weighs only within its group, so a probe at nice 19 alone took a whole core from the user's session
    (measured here: 473 ticks to each of the user's two busy loops' 260; with its group at 19, 22 to their 485)."""
    with contextlib.suppress(OSError):
        os.nice(19)
    if os.getsid(0) != os.getpid():  # not its own session's leader: the group is the user's, left as it is
        return
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w", encoding="ascii") as group:
        group.write("19")


def main(argv: list[str]) -> int:
    from app.speed.machine import speed_folder

    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    return run(speed_folder(), argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A stand-in for app.speed.probe in the background probe's tests: it notes that it ran (a line in the file
FAKE_PROBE_LOG names), takes FAKE_PROBE_SECONDS as the real probe takes seconds, and prints a quiet machine's
figures as the probe prints its own (one JSON line)."""

from __future__ import annotations

import json
import os
import time

from app.speed.machine import machine_key
from tests.support.speed import quiet_figures

if __name__ == "__main__":
    with open(os.environ["FAKE_PROBE_LOG"], "a", encoding="utf-8") as log:
        try:  # Linux's scheduling group, where the kernel has them: "/autogroup-N nice K"
            with open("/proc/self/autogroup", encoding="ascii") as group:
                words = group.read().split()  # nothing where the task is in the root group
                grouped = f" group {words[-1] if words else 'none'}"
        except OSError:
            grouped = ""
        log.write(f"{os.getpid()}{grouped} nice {os.nice(0)}\n")
    time.sleep(float(os.environ.get("FAKE_PROBE_SECONDS", "1")))
    print(json.dumps(quiet_figures(threads=machine_key()["threads"])))

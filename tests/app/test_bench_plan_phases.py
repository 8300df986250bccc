"""bench/plan_phases.py's breakdown covers a real first plan: every phase it names is found and run (a renamed
function would leave its time to "the rest" unseen), and the rows add up to the plan's time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.plan_phases import IMPORT_PREFIX, OTHER, PHASES

ROOT = Path(__file__).resolve().parents[2]


def test_every_phase_of_a_first_plan_is_timed(tmp_path: Path, gemma_path: Path) -> None:
    out = tmp_path / "phases.json"
    env = {**os.environ, "VRAMCHAT_HOME": str(tmp_path / "home"), "VRAMCHAT_SPEED_PROBE": "off"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "plan_phases.py"), "--child", str(gemma_path), str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["code"] == 0  # the demo fits: the plan ran to its end
    own = result["own"]
    for phase in PHASES:
        assert own.get(phase, 0.0) > 0.0, f"{phase}: none of its functions ran"
    assert any(name.startswith(IMPORT_PREFIX + "planner.") for name in own)
    assert 0.0 <= own[OTHER] < 0.25 * result["total"]  # the phases hold most of the plan
    assert abs(sum(own.values()) - result["total"]) < 1e-6

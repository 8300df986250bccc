"""Dataclasses' generated methods are compiled once and kept between runs (planner/dataclass_code.py): the next
process defines the same classes from the kept code, and they behave as freshly compiled ones do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# what a plan imports, then one class of each kind used with its generated methods
_RUN = """
import json
from planner import dataclass_code
import planner.memory, planner.fit, planner.hardware
from planner.hardware import Device
a = Device("CUDA0", "gpu", "cuda", 8 << 30, 6 << 30)
b = Device("CUDA0", "gpu", "cuda", 8 << 30, 6 << 30)
try:
    a.free = 0
    frozen = False
except Exception as exc:
    frozen = type(exc).__name__
import inspect
from dataclasses import dataclass
@dataclass
class Undocumented:
    x: int
compiled, reused = dataclass_code.counts()
print(json.dumps({"compiled": compiled, "reused": reused, "equal": a == b, "hash": hash(a) == hash(b),
                  "repr": repr(a)[:41], "frozen": frozen, "signature": str(inspect.signature(Device.__init__))[:36],
                  "doc": Undocumented.__doc__}))
"""


def _run(prefix: Path, *flags: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(
        [sys.executable, "-X", f"pycache_prefix={prefix}", *flags, "-c", _RUN],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _kept(prefix: Path) -> list[Path]:
    return sorted(prefix.rglob("dataclass_code.*/*.marshal"))


def test_the_second_run_defines_every_dataclass_from_kept_code_that_behaves_the_same(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first["compiled"] > 100 and first["reused"] == 0  # a plan's imports: hundreds of methods
    kept = [p.name for p in _kept(tmp_path)]  # a file for each module that defines dataclasses
    assert "planner.hardware.marshal" in kept and "planner.memory.marshal" in kept
    second = _run(tmp_path)
    assert second["compiled"] == 0 and second["reused"] == first["compiled"]
    expected = {
        "equal": True,
        "hash": True,
        "repr": "Device(name='CUDA0', kind='gpu', backend=",
        "frozen": "FrozenInstanceError",
        # the annotations are the types, as dataclasses' own compile makes them (not strings of local names)
        "signature": "(self, name: 'str', kind: 'str', bac",  # planner's own annotations are strings
        "doc": "Undocumented(x: int)",
    }
    assert {k: first[k] for k in expected} == expected and {k: second[k] for k in expected} == expected


def test_nothing_is_kept_where_byte_code_is_not_written(tmp_path: Path) -> None:
    assert _run(tmp_path, "-B")["compiled"] > 100
    assert _kept(tmp_path) == []


def test_a_damaged_or_foreign_file_is_compiled_again_and_replaced(tmp_path: Path) -> None:
    _run(tmp_path)
    kept = {path: path.read_bytes() for path in _kept(tmp_path)}
    cut_short = {path: data[:100] for path, data in kept.items()}
    another_python = {path: b"\x00\x01\x02\x03" + data[4:] for path, data in kept.items()}
    for damage in (cut_short, another_python):
        for path, data in damage.items():
            path.write_bytes(data)
        assert _run(tmp_path)["compiled"] > 100
        assert _run(tmp_path)["compiled"] == 0  # written whole again


def test_a_process_that_defines_no_dataclass_imports_nothing_for_them(tmp_path: Path) -> None:
    """A replayed plan imports planner but not dataclasses: the kept code costs it no import and no read."""
    code = "import sys, planner; print(sorted(m for m in ('dataclasses', 'inspect') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"

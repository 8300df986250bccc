"""Speed figures for tests: a quiet probe's figures (kept for every test's home, so that a plan's speed
does not depend on how busy the test machine is) and a fixed prediction for the screens."""

from __future__ import annotations

from typing import Any

from planner.speed import MEASURED, Figure, SpeedPrediction

# a quiet probe of a 2-core Xeon (app/speed/probe.py's output): plausible figures app/speed/trust.py trusts
QUIET_FIGURES: dict[str, Any] = {
    "threads": 2,
    "graph_seconds": 4.8e-6,
    "op_seconds": 5.4e-7,
    "decode_rates": {
        "f32": 127.0e9,
        "f16": 103.0e9,
        "q4_0": 32.1e9,
        "q4_1": 34.8e9,
        "q5_0": 37.1e9,
        "q5_1": 37.4e9,
        "q8_0": 67.8e9,
        "q2_K": 31.4e9,
        "q3_K": 26.7e9,
        "q4_K": 44.4e9,
        "q5_K": 44.0e9,
        "q6_K": 66.7e9,
        "iq4_nl": 33.7e9,
        "iq4_xs": 32.7e9,
        "bf16": 125.2e9,
        "mxfp4": 31.3e9,
    },
    "prefill_rates": {
        "f16": 308.1e9,
        "q8_0": 258.3e9,
        "q4_0": 215.5e9,
        "q5_0": 206.3e9,
        "q4_K": 374.3e9,
        "q6_K": 322.1e9,
    },
    "large_factor": 0.14,
    "read_bandwidth": 9.0e9,
    "attention_seconds": {"64": 3.4e-8, "128": 0.9e-8, "256": 1.2e-8},
    "load": 0.05,
    "rounds": 3,
    "probe_seconds": 0.6,
}


def quiet_figures(**changes: Any) -> dict[str, Any]:
    """QUIET_FIGURES with some figures changed (a disturbed sample, another thread count)."""
    return QUIET_FIGURES | changes


def fixed_speed(value: float, n_ctx: int = 4096) -> SpeedPrediction:
    """A measured prediction of `value` tok/s (+-30%), the same at every fill."""
    figure = Figure(value, value * 0.7, value * 1.3, MEASURED, MEASURED)
    return SpeedPrediction(figure, figure, figure, n_ctx, [], [])


class BusyThenQuiet:
    """This machine's probe disturbed by other programs until `quiet()`: no figures kept, the first probe
    untrusted (90% of the CPUs used by others), a retry allowed after half a second."""

    def __init__(self, monkeypatch: Any) -> None:
        from app.speed import machine as speed_machine

        self.busy = True
        self._machine = speed_machine
        kept = speed_machine.speed_folder() / speed_machine.MACHINE_FILE
        kept.unlink(missing_ok=True)
        monkeypatch.setattr(speed_machine, "run_probe", self._probe)
        monkeypatch.setattr(speed_machine, "RETRY_SECONDS", 0.5)
        speed_machine._memo.clear()

    def _probe(self, full: bool = False) -> dict[str, Any]:
        figures = quiet_figures(threads=self._machine.machine_key()["threads"])
        return figures | {"load": 0.9} if self.busy else figures

    def quiet(self) -> None:
        self.busy = False

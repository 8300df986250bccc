"""The speed a plan shows before the load: decode at the start of a chat (fill 0) and at a full
context (fill n_ctx), and the prefill of a PROMPT_TOKENS-token prompt (SpeedPrediction), each a Figure
with its range and basis (planner.speed.basis).

Decode speed = 1 / (the sum of the devices' times + the fixed costs) and prefill speed = the prompt's
tokens / its seconds, both by planner.speed.timing's rules. Once real replies were measured against
the prediction (a Calibration of their measured / predicted ratios, app/speed/learn.py), a figure is
the raw one times their median, its range their spread. `predicted_decode` and `predicted_prefill`
are the raw figures a reply's measured speed is compared with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from planner.median import median
from planner.speed.basis import (
    BASIS_ORDER,
    ENOUGH_REPLIES,
    LEARNED,
    MAX_RATIOS,
    MEASURED_BAND,
    MIN_LEARNED_BAND,
    PENDING,
    TABLE,
    TABLE_BAND,
    UNKNOWN,
)
from planner.speed.cost import TokenCost
from planner.speed.machine import CpuSpeed, GpuSpeed
from planner.speed.timing import Duration, decode_seconds, prefill_seconds
from planner.units import format_size

PROMPT_TOKENS = 512  # the prompt a prefill figure is quoted for


@dataclass(frozen=True)
class Calibration:
    """Measured / predicted speed of real replies, newest last, and whose replies they were."""

    decode_ratios: tuple[float, ...] = ()
    prefill_ratios: tuple[float, ...] = ()
    scope: str = "this model and configuration"


@dataclass(frozen=True)
class Figure:
    """A predicted speed in tokens per second, with its range and basis; value None when unknown."""

    value: float | None
    low: float | None
    high: float | None
    basis: str
    note: str = ""
    replies: int = 0

    def to_json(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 1)

        return {
            "tokens_per_second": r(self.value),
            "low": r(self.low),
            "high": r(self.high),
            "basis": self.basis,
            "replies": self.replies,
            "note": self.note,
        }

    def text(self) -> str:
        if self.basis == PENDING:  # why is said once, in the prediction's notes
            return "measuring…"
        if self.value is None or self.low is None or self.high is None:
            return f"unknown ({self.note})" if self.note else "unknown"
        span = f"{_num(self.low)}–{_num(self.high)}"
        if self.basis == LEARNED and self.replies >= ENOUGH_REPLIES:
            return f"≈{_num(self.value)} tok/s ({span}, {self.note})"
        return f"{span} tok/s ({self.note or self.basis})"


def _span(f: Figure) -> str:
    """ "≈38 (35–40)" once enough replies taught it, else the range "30–45"."""
    assert f.value is not None and f.low is not None and f.high is not None
    if f.basis == LEARNED and f.replies >= ENOUGH_REPLIES:
        return f"≈{_num(f.value)} ({_num(f.low)}–{_num(f.high)})"
    return f"{_num(f.low)}–{_num(f.high)}"


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.1f}"


@dataclass(frozen=True)
class DeviceSpeed:
    name: str
    basis: str
    source: str
    bytes_per_token: int
    seconds_per_token: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "basis": self.basis,
            "source": self.source,
            "bytes_per_token": self.bytes_per_token,
            "seconds_per_token": None if self.seconds_per_token is None else round(self.seconds_per_token, 6),
        }


@dataclass(frozen=True)
class SpeedPrediction:
    """Decode at the start and at a full context, prefill of a 512-token prompt: each a Figure."""

    decode_start: Figure
    decode_full: Figure
    prefill: Figure
    n_ctx: int
    devices: list[DeviceSpeed]
    notes: list[str]
    raw_decode_start: float | None = None  # before any learning (what a reply is compared with)

    @property
    def basis(self) -> str:
        bases = [f.basis for f in (self.decode_start, self.prefill)]
        known = [b for b in bases if b != UNKNOWN]
        if not known:
            return UNKNOWN
        return min(known, key=BASIS_ORDER.index)

    @property
    def measuring(self) -> bool:
        """Whether the figure waits for a trusted probe of this CPU (shown as "measuring…")."""
        return self.decode_start.basis == PENDING

    def to_json(self) -> dict[str, Any]:
        return {
            "basis": self.basis,
            "measuring": self.measuring,
            "decode_start": self.decode_start.to_json() | {"context_tokens": 0},
            "decode_full": self.decode_full.to_json() | {"context_tokens": self.n_ctx},
            "prefill": self.prefill.to_json() | {"prompt_tokens": PROMPT_TOKENS},
            "devices": [d.to_json() for d in self.devices],
            "notes": list(self.notes),
        }

    def line(self) -> str:
        """One line for the picker: decode at the start and at a full context, the prompt, the basis."""
        start = self.decode_start
        if start.basis == PENDING:
            return f"Speed: measuring… ({start.note})"
        if start.value is None:
            return f"Speed: {start.text()}"
        parts = [f"{_span(start)} tok/s at the start"]
        if self.decode_full.value is not None:
            parts.append(f"{_span(self.decode_full)} at {self.n_ctx:,} tokens")
        if self.prefill.value is not None:
            parts.append(f"prompt {_span(self.prefill)} tok/s")
        return f"Speed: {', '.join(parts)} ({start.note or start.basis})"

    def cell(self) -> str:
        """The file's speed in a table whose column says tok/s: the decode at the start of a chat as
        "34–64" (a range), "≈41" (learned from enough replies), "measuring…" or "?". Every list of
        files shows this one text (the model list, the hub, --quants); --plan shows the same range."""
        f = self.decode_start
        if f.basis == PENDING:
            return "measuring…"
        if f.value is None or f.low is None or f.high is None:
            return "?"
        if f.basis == LEARNED and f.replies >= ENOUGH_REPLIES:
            return f"≈{_num(f.value)}"
        return f"{_num(f.low)}–{_num(f.high)}"

    def short(self) -> str:
        """`cell` with its unit, for a column that does not say it."""
        cell = self.cell()
        return cell if self.measuring else f"{cell} tok/s"

    def text(self) -> str:
        """The `--plan` table's section."""
        rows = (
            ("decode at the start", self.decode_start),
            (f"decode at {self.n_ctx:,} tokens", self.decode_full),
            (f"prompt of {PROMPT_TOKENS} tokens", self.prefill),
        )
        lines = ["Speed (predicted before the load)"] + [f"  {label:<26}{f.text()}" for label, f in rows]
        for d in self.devices:
            per = "" if d.seconds_per_token is None else f", {d.seconds_per_token * 1000:.2f} ms a token"
            lines.append(f"  {d.name:<8} reads {format_size(d.bytes_per_token)} a token{per}: {d.source}")
        lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)


def _band(basis: str) -> float:
    return TABLE_BAND if basis == TABLE else MEASURED_BAND


def _figure(raw: float | None, basis: str, ratios: tuple[float, ...], scope: str, why: str = "") -> Figure:
    """A figure from a raw prediction (tok/s) and the ratios real replies measured against it."""
    if raw is None or raw <= 0:
        return Figure(None, None, None, UNKNOWN, why)
    if not ratios:
        band = _band(basis)
        return Figure(raw, raw * (1 - band), raw * (1 + band), basis, basis)
    ratios = ratios[-MAX_RATIOS:]
    n = len(ratios)
    mid = median(ratios)
    # the band: the replies' own spread, and while few exist, the unlearned band shrinking with their count
    spread = max(abs(max(ratios) - mid), abs(mid - min(ratios))) / mid
    floor = MEASURED_BAND / math.sqrt(n + 1) if n < ENOUGH_REPLIES else 0.0
    half = min(max(spread, floor, MIN_LEARNED_BAND), _band(basis))
    value = raw * mid
    words = "reply" if n == 1 else "replies"
    note = f"learned from {n} {words}" + ("" if scope == "this model and configuration" else f" ({scope})")
    return Figure(value, value * (1 - half), value * (1 + half), LEARNED, note, n)


def predict(
    cost: TokenCost,
    cpu: CpuSpeed | None,
    gpus: dict[str, GpuSpeed] | None = None,
    calibration: Calibration | None = None,
    cpu_pending: str = "",
) -> SpeedPrediction:
    """The speed of a plan whose per-token cost is `cost`, on this machine's figures. `cpu_pending`,
    with no `cpu`: why the CPU's figures are still being measured (the figures that need them then
    read "measuring…", not "unknown")."""
    gpus = gpus or {}
    cal = calibration or Calibration()
    start = decode_seconds(cost, 0, cpu, gpus)
    full = decode_seconds(cost, cost.n_ctx, cpu, gpus)
    pre = prefill_seconds(cost, PROMPT_TOKENS, 0, cpu)
    why = "; ".join(s for _, sec, _, s in start.per_device if sec is None) or "no figure"

    def rate(t: Duration) -> float | None:
        return 1.0 / t.seconds if t.seconds else None

    pre_rate = PROMPT_TOKENS / pre.seconds if pre.seconds else None
    devices = [
        DeviceSpeed(d.name, basis, source, d.weight_bytes() + d.state_bytes, sec)
        for d, sec, basis, source in start.per_device
    ]
    notes = list(cost.notes) + list(start.notes)
    # a figure missing only figures that are being measured (the CPU's, a device's whose probe was
    # disturbed) is pending rather than unknown
    waiting = bool(cpu is None and cpu_pending)
    missing = [(d, basis) for d, sec, basis, _ in start.per_device if sec is None]
    devices_waiting = bool(missing) and all(b == PENDING or (d.is_host and waiting) for d, b in missing)
    waits = [cpu_pending] if waiting and any(d.is_host for d, _ in missing) else []
    waits += [s for d, _, b, s in start.per_device if b == PENDING and not d.is_host]
    pending_note = "; ".join(waits)

    def pending(f: Figure, needs_cpu: bool) -> Figure:
        return Figure(None, None, None, PENDING, pending_note) if f.value is None and needs_cpu else f

    return SpeedPrediction(
        decode_start=pending(_figure(rate(start), start.basis, cal.decode_ratios, cal.scope, why), devices_waiting),
        decode_full=pending(_figure(rate(full), full.basis, cal.decode_ratios, cal.scope, why), devices_waiting),
        prefill=pending(
            _figure(pre_rate, pre.basis, cal.prefill_ratios, cal.scope, "; ".join(pre.notes) or why),
            waiting and all(d.is_host for d in cost.devices),
        ),
        n_ctx=cost.n_ctx,
        devices=devices,
        notes=list(dict.fromkeys(notes)),
        raw_decode_start=rate(start),
    )


def predicted_decode(cost: TokenCost, fill: int, cpu: CpuSpeed | None, gpus: dict[str, GpuSpeed]) -> float | None:
    """Raw decode tok/s at a fill, before learning (what a reply's measured speed is compared with)."""
    t = decode_seconds(cost, fill, cpu, gpus)
    return 1.0 / t.seconds if t.seconds else None


def predicted_prefill(cost: TokenCost, n_tokens: int, start: int, cpu: CpuSpeed | None) -> float | None:
    t = prefill_seconds(cost, n_tokens, start, cpu)
    return n_tokens / t.seconds if t.seconds else None

"""`GET /metrics` in Prometheus's text format: what the dashboard draws, for any scraper.

Per device (each GPU by llama.cpp's name, CPU for the host): memory planned for what is allocated now,
allocated (llama.cpp's own buffers, from its log), in use (the driver's or the OS's reading) and total;
the KV cache committed, in use and at its maximum; the context's cells; requests running and waiting,
served by endpoint and status; tokens read and written; tokens per second now. Names are prefixed
`vramchat_`; sizes are in bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.serve.monitor import Monitor

if TYPE_CHECKING:
    from app.session import ModelSession


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Text:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self._declared: set[str] = set()

    def metric(self, name: str, kind: str, doc: str, samples: Iterable[tuple[dict[str, str], float]]) -> None:
        full = f"vramchat_{name}"
        if full not in self._declared:
            self._declared.add(full)
            self.lines += [f"# HELP {full} {doc}", f"# TYPE {full} {kind}"]
        for labels, value in samples:
            inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            number = f"{value:.6g}" if isinstance(value, float) and not value.is_integer() else str(int(value))
            self.lines.append(f"{full}{{{inner}}} {number}" if inner else f"{full} {number}")


def render_metrics(session: ModelSession, monitor: Monitor, model_id: str) -> str:
    out = _Text()
    running = monitor.running()
    totals = monitor.totals()
    out.metric("requests_running", "gauge", "Requests being answered now.", [({}, sum(not r.waiting for r in running))])
    out.metric("requests_queued", "gauge", "Requests waiting for a slot.", [({}, sum(r.waiting for r in running))])
    out.metric("slots", "gauge", "Replies the server runs at once (--parallel).", [({}, monitor.slots)])
    out.metric(
        "requests_total",
        "counter",
        "Requests answered, by endpoint and HTTP status.",
        [({"endpoint": e, "status": str(s)}, n) for (e, s), n in sorted(totals.requests.items())],
    )
    out.metric(
        "requests_disconnected_total", "counter", "Replies stopped because the client left.", [({}, totals.disconnects)]
    )
    out.metric(
        "tokens_total",
        "counter",
        "Tokens read (prompt) and written (completion).",
        [({"kind": "prompt"}, totals.prompt_tokens), ({"kind": "completion"}, totals.completion_tokens)],
    )
    out.metric(
        "tokens_per_second",
        "gauge",
        "Tokens written per second now, all replies together.",
        [({}, monitor.tokens_per_second())],
    )
    out.metric(
        "request_tokens_per_second",
        "gauge",
        "Tokens written per second now, per running request.",
        [
            ({"request": str(r.id), "endpoint": r.endpoint}, r.tokens_per_second(_now()))
            for r in running
            if not r.waiting
        ],
    )
    model = session.model
    if model is None:
        out.metric("model_loaded", "gauge", "Whether a model is loaded.", [({}, 0)])
        return "\n".join(out.lines) + "\n"
    out.metric("model_loaded", "gauge", "Whether a model is loaded.", [({"model": model_id}, 1)])
    now = model.now
    planned = {d.name: d.planned for d in now.gpus}
    planned["CPU"] = now.host.planned
    out.metric(
        "memory_planned_bytes",
        "gauge",
        "Memory the plan gives what is allocated now, per device.",
        [({"device": d}, v) for d, v in planned.items()],
    )
    allocated = _allocated(model)
    out.metric(
        "memory_allocated_bytes",
        "gauge",
        "llama.cpp's buffers as its log reported them, per device.",
        [({"device": d}, v) for d, v in allocated.items()],
    )
    telemetry = session.telemetry
    sample = telemetry.latest() if telemetry is not None else None
    cells = session.engine.kv_cells_used()
    if sample is not None:
        out.metric(
            "memory_used_bytes",
            "gauge",
            "Memory in use as the driver or the OS reads it, per device.",
            [({"device": d}, u) for d, (u, _t) in sample.devices.items()],
        )
        out.metric(
            "memory_total_bytes",
            "gauge",
            "Memory of each device.",
            [({"device": d}, t) for d, (_u, t) in sample.devices.items()],
        )
        out.metric("process_resident_bytes", "gauge", "The engine process's resident memory.", [({}, sample.rss)])
        out.metric("kv_committed_bytes", "gauge", "The KV cache as allocated now.", [({}, sample.kv_allocated)])
        out.metric("kv_used_bytes", "gauge", "The KV cache the cells in use take.", [({}, sample.kv_used)])
        out.metric(
            "kv_maximum_bytes", "gauge", "The KV cache at the plan's largest context.", [({}, sample.kv_maximum)]
        )
        out.metric(
            "compute_bytes",
            "gauge",
            "Compute buffers as allocated, per device.",
            [({"device": d}, v) for d, v in sample.compute.items()],
        )
    out.metric(
        "context_cells",
        "gauge",
        "The context: cells in use, committed now, and the plan's maximum.",
        [({"state": "used"}, cells), ({"state": "committed"}, model.n_ctx), ({"state": "maximum"}, model.max_ctx)],
    )
    if monitor.slots > 1:
        out.metric(
            "slot_cells",
            "gauge",
            "KV cells each running request's sequence holds.",
            [({"request": str(r.id)}, r.cells) for r in running if not r.waiting],
        )
    return "\n".join(out.lines) + "\n"


def _now() -> float:
    import time

    return time.monotonic()


def _allocated(model) -> dict[str, int]:  # model: LoadedModel
    from app.engine.planned_actual import compare

    out: dict[str, int] = {}
    try:
        rows = compare(model.now, model.report.measurements)
    except Exception:  # a log that could not be read leaves the figure out, never the endpoint
        return out
    for row in rows:
        if row.measured:
            out[row.device] = out.get(row.device, 0) + row.measured
    return out

"""One door for every plan: the first (`app.planning.plan_source`) and each re-plan after it (a load that ran
out of memory, llama.cpp's dry run that needs more, an RPC server lost, the CPU's extra buffer types turned off,
the context at the size a load starts or grows to) go through `app.planning`, which places the model's ops as
each device runs them and counts what earlier loads taught. The second plan once skipped those lessons and
could repeat the first one's mistake."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from app.devices import learned_buffers
from app.planning import Machine, PlanChoice, plan_again, plan_at_context, plan_config, plan_smaller, plan_source
from planner.hardware import Device, Host
from planner.measured import Gap

APP = Path(__file__).resolve().parents[2] / "app"
# the planner's entries that make a plan: only app/planning.py may call them
SOLVERS = {
    ("planner.fit", "solve"),
    ("planner.fit", "evaluate"),
    ("planner.memory", "plan_memory"),
    ("planner.retry", "safer_plan"),
    ("planner.elastic", "committed_plan"),
}


def test_nothing_but_app_planning_calls_the_solver() -> None:
    found = []
    for path in APP.rglob("*.py"):
        if path == APP / "planning.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    if (node.module, alias.name) in SOLVERS:
                        found.append(f"{path.relative_to(APP.parent)}: {node.module}.{alias.name}")
    assert found == [], "plan through app.planning (plan_source, plan_again, plan_smaller, plan_config ...)"


GPU = Device("CUDA0", "gpu", "cuda", total=8 << 30, free=7 << 30, simulated=True)
HOST = Host(total=32 << 30, free=24 << 30, simulated=True)


@pytest.fixture
def taught(zoo: dict[str, Path], _private_home: Path) -> tuple[object, int]:
    """A plan of the tiny llama on one GPU, and a lesson an earlier load of it left: 3 MiB more compute on
    CUDA0 than the rules said (app.devices.learned_buffers, as a load that allocated more records it)."""
    planned = plan_source(str(zoo["llama-f16"]), Machine([GPU], HOST), PlanChoice())
    plan = planned.fit.plan
    compute = sum(b.bytes for b in plan.buffers if b.kind == "compute" and b.device == "CUDA0")
    more = 3 << 20
    learned_buffers.remember(plan, {("compute", "CUDA0"): compute + more})
    return planned, more


def _compute(plan, device: str = "CUDA0") -> int:
    return sum(b.bytes for b in plan.buffers if b.kind == "compute" and b.device == device)


def test_every_re_plan_counts_what_earlier_loads_taught(taught: tuple[object, int], zoo: dict[str, Path]) -> None:
    planned, more = taught
    first = plan_source(str(zoo["llama-f16"]), Machine([GPU], HOST), PlanChoice()).fit.plan
    rules = planned.fit.plan  # made before the lesson was kept
    assert _compute(first) == _compute(rules) + more  # the first plan counts it (as it always did)
    model = planned.anatomy
    again = plan_again(model, rules, [GPU], HOST).plan  # llama.cpp's dry run, an RPC server lost
    assert again.config == rules.config and _compute(again) == _compute(first)
    priced = plan_config(model, rules.config, [GPU], HOST, None).plan  # the CPU's extra buffer types
    assert _compute(priced) == _compute(first)
    # a load that ran out of memory: the next smaller plan, its lessons counted where its configuration has one
    smaller = plan_smaller(model, first, [dataclasses.replace(GPU, free=first.gpus[0].planned)], HOST, {"CUDA0"})
    assert smaller is not None and smaller.result.plan.config != first.config
    learned_buffers.remember(smaller.result.plan, {("compute", "CUDA0"): _compute(smaller.result.plan) + more})
    again_smaller = plan_smaller(model, first, [dataclasses.replace(GPU, free=first.gpus[0].planned)], HOST, {"CUDA0"})
    assert again_smaller is not None and _compute(again_smaller.result.plan) == _compute(smaller.result.plan) + more


def test_the_context_a_load_starts_at_is_planned_through_the_door(zoo: dict[str, Path], _private_home) -> None:
    planned = plan_source(str(zoo["llama-f16"]), Machine([GPU], HOST), PlanChoice())
    plan = planned.fit.plan
    start = plan_at_context(plan, 4096, [GPU], HOST)
    assert start.resolved.n_ctx == 4096 < plan.resolved.n_ctx
    assert plan_at_context(plan, plan.resolved.n_ctx, [GPU], HOST) is plan
    gap: list[Gap] = learned_buffers.remember(start, {("compute", "CUDA0"): _compute(start) + (2 << 20)})
    assert gap
    assert _compute(plan_at_context(plan, 4096, [GPU], HOST)) == _compute(start) + (2 << 20)


def test_a_plan_and_its_speed_build_each_graph_once(zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The compute pricing's one-token graph is the one the speed plan counts: built once, not twice."""
    from planner import compute, compute_memo, graph_counts

    monkeypatch.setattr(graph_counts, "_memo", {})
    built: list[tuple[int, int, int]] = []
    real = compute.build_graph

    def counting(model, r, kv, n_tokens, n_seqs, n_outputs, *args, **kwargs):
        built.append((n_tokens, n_seqs, n_outputs))
        return real(model, r, kv, n_tokens, n_seqs, n_outputs, *args, **kwargs)

    monkeypatch.setattr(compute, "build_graph", counting)
    compute_memo.use_store(None)  # no sizes kept from earlier plans: every graph is priced here
    planned = plan_source(str(zoo["llama-f16"]), Machine([], HOST), PlanChoice())
    assert planned.speed.decode_start is not None
    assert built.count((1, 1, 1)) == 1, built  # priced for the compute buffer, counted for the speed

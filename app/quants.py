"""Every quant of a model, planned for this machine: the rows of `--quants` and of the picker's hub view.

`plan_quants` reads the headers of all the models in parallel (remote ones by ranges, each kept in the
cache) and plans each as it arrives with the caller's planner (the CLI's: the same plan `--plan` prints, what-if
flags and all), and marks the best choice with the reason. No Textual, no printing: app/remote_cli.py
prints the table, the picker will draw the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.plan_cache import ModelSummary
from app.sources.model import ModelSource

if TYPE_CHECKING:
    from planner.fit import FitResult
    from planner.model import ModelAnatomy

MAX_PARALLEL = 8
# quality order of llama.cpp's quant types, best first (equal quality shares a rank)
_QUALITY = [
    ("F32",),
    ("BF16", "F16"),
    ("Q8_0",),
    ("Q6_K", "UD-Q6_K_XL"),
    ("Q5_K_M", "UD-Q5_K_XL"),
    ("Q5_K_S", "Q5_1"),
    ("Q5_0",),
    ("Q4_K_M", "UD-Q4_K_XL", "MXFP4", "MXFP4_MOE"),
    ("IQ4_NL", "IQ4_XS", "Q4_K_S", "Q4_1"),
    ("Q4_0",),
    ("Q3_K_L", "UD-Q3_K_XL"),
    ("Q3_K_M", "IQ3_M"),
    ("Q3_K_S", "IQ3_S", "IQ3_XS", "IQ3_XXS"),
    ("Q2_K", "Q2_K_L", "UD-Q2_K_XL", "IQ2_M", "IQ2_S"),
    ("IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S", "TQ1_0", "TQ2_0"),
]
QUALITY_RANK = {name: rank for rank, names in enumerate(_QUALITY) for name in names}
GOOD_ENOUGH = QUALITY_RANK["Q4_K_M"]  # the quality most users settle on: near the full model's


@dataclass
class QuantRow:
    """One model of the repo (a quant): its plan on this machine, or why there is none."""

    source: ModelSource
    anatomy: ModelAnatomy | None = None
    result: FitResult | None = None
    error: str = ""
    tokens_per_second: float | None = None  # None until the speed model is wired (issue 26)
    best: bool = False

    @property
    def quant(self) -> str:
        label = self.source.quant
        if not label and self.anatomy is not None:
            label = self.anatomy.quantization
        return label or "?"

    @property
    def label(self) -> str:
        """The quant as the table shows it: a split model says how many files it is."""
        n = len(self.source.files)
        return f"{self.quant} ({n} files)" if n > 1 else self.quant

    @property
    def summary(self) -> ModelSummary:
        """The picker's summary of this row (what `app.catalog.fit_badge` draws)."""
        a, r = self.anatomy, self.result
        if a is None or r is None:
            return ModelSummary(error=self.error or "not planned", file_bytes=self.source.size)
        plan = r.plan
        return ModelSummary(
            name=a.name,
            architecture=a.architecture,
            n_params=a.n_params,
            quantization=a.quantization,
            file_bytes=a.file_bytes,
            n_layer=a.n_layer,
            n_ctx_train=a.n_ctx_train,
            verdict=plan.verdict,
            layers_on_gpu=plan.layers_on_gpu,
            n_ctx=plan.resolved.n_ctx,
            type_k=plan.resolved.type_k.name,
            flash_attn=plan.resolved.config.flash_attn,
            exact=a.exact,
            error=self.error,
        )


@dataclass
class QuantTable:
    """A repo's quants planned for one machine, and the one to choose."""

    rows: list[QuantRow]
    best: int | None = None  # index into rows
    why: str = ""
    notes: list[str] = field(default_factory=list)


def predicted_tokens_per_second(anatomy: ModelAnatomy, result: FitResult) -> float | None:
    """Predicted decode speed of this plan on this machine: the `tok/s` column.

    Returns None ("-" in the table) until planner/speed.py (issue 26) is wired here; this is the one
    function to connect it."""
    return None


def plan_quants(
    sources: list[ModelSource],
    load: Callable[[ModelSource], ModelAnatomy],
    plan: Callable[[ModelSource, ModelAnatomy], FitResult],
    progress: Callable[[int, int], None] | None = None,
    parallel: int = MAX_PARALLEL,
) -> QuantTable:
    """Read every model's header (in parallel threads) and plan each as soon as it is read (in this
    thread), then choose the best.

    `load` is app.sources.load_anatomy; `plan` solves one model for the devices and wishes at hand.
    Blocking: the picker runs it in a worker. `progress(done, total)` is called in this thread as each
    model is planned."""
    from concurrent.futures import as_completed

    rows = [QuantRow(source) for source in sources]
    if sources:
        with ThreadPoolExecutor(max(1, min(parallel, len(sources)))) as pool:
            pending = {pool.submit(_read_one, source, load): index for index, source in enumerate(sources)}
            for done, future in enumerate(as_completed(pending), start=1):
                row = rows[pending[future]]
                row.anatomy, row.error = future.result()
                if row.anatomy is not None:
                    _plan_row(row, plan)
                if progress:
                    progress(done, len(sources))
    table = QuantTable(rows)
    table.best, table.why = best_choice(rows)
    if table.best is not None:
        rows[table.best].best = True
    table.notes = list(dict.fromkeys(n for s in sources for n in s.notes))
    return table


def _read_one(source: ModelSource, load: Callable[[ModelSource], ModelAnatomy]) -> tuple[ModelAnatomy | None, str]:
    """The model's anatomy, or the one-line reason it cannot be read."""
    from app.errors import VramchatError
    from planner.errors import PlannerError

    if source.problem:
        return None, source.problem
    try:
        return load(source), ""
    except (PlannerError, VramchatError) as exc:
        return None, str(getattr(exc, "problem", None) or exc)


def _plan_row(row: QuantRow, plan: Callable[[ModelSource, ModelAnatomy], FitResult]) -> None:
    from planner.errors import PlannerError

    assert row.anatomy is not None
    try:
        row.result = plan(row.source, row.anatomy)
        row.tokens_per_second = predicted_tokens_per_second(row.anatomy, row.result)
    except PlannerError as exc:
        row.error = str(exc)


def best_choice(rows: list[QuantRow]) -> tuple[int | None, str]:
    """The quant to choose and why: the best quality that runs wholly on the GPU at the context wished;
    where none does, the smallest of Q4_K_M quality or better that fits (layers on the CPU run at the
    speed of memory: the smaller, the faster)."""
    fits = [
        (i, r) for i, r in enumerate(rows) if r.result is not None and not r.error and r.result.plan.verdict != "no_fit"
    ]
    if not fits:
        return None, "no quant fits this machine"

    def ctx(r: QuantRow) -> int:
        assert r.result is not None
        return r.result.plan.resolved.n_ctx

    def wanted(r: QuantRow) -> int:
        assert r.result is not None
        return r.result.desired_ctx

    full = [(i, r) for i, r in fits if r.result is not None and r.result.plan.verdict == "full_gpu"]
    if full:
        whole = [(i, r) for i, r in full if ctx(r) >= wanted(r)]
        if whole:
            # of equal size, F16 rather than BF16 (which older GPUs run slowly)
            i, r = max(whole, key=lambda ir: (ir[1].source.size, ir[1].quant != "BF16", -ir[0]))
            return i, f"the largest quant that runs wholly on the GPU at {ctx(r):,} tokens"
        i, r = max(full, key=lambda ir: (ctx(ir[1]), ir[1].source.size))
        return i, f"runs wholly on the GPU with the longest context ({ctx(r):,} tokens)"
    reach = [(i, r) for i, r in fits if ctx(r) >= wanted(r)] or fits
    good = [(i, r) for i, r in reach if QUALITY_RANK.get(r.quant, len(_QUALITY)) <= GOOD_ENOUGH]
    where = (
        "on the CPU"
        if all(r.result and r.result.plan.verdict == "cpu_only" for _, r in reach)
        else "in part on the CPU"
    )
    if good:
        i, r = min(good, key=lambda ir: (ir[1].source.size, ir[0]))
        return i, (
            f"runs {where}, where the smaller the faster: the smallest of Q4_K_M quality or better ({ctx(r):,} tokens)"
        )
    i, r = max(reach, key=lambda ir: (ir[1].source.size, -ir[0]))
    return i, f"runs {where}: the largest quant that fits ({ctx(r):,} tokens)"

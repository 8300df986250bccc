"""Every quant of a model, planned for this machine: the rows of `--quants` and of the picker's hub view.

`plan_quants` reads the headers of all the models in parallel (remote ones by ranges, each kept in the
cache) and plans each as it arrives with the caller's planner (the CLI's: the same plan `--plan` prints, what-if
flags and all), and marks the best choice with the reason. No Textual, no printing: app/cli/quant_table.py
prints the table, the picker will draw the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.caches.plans import ModelSummary
from app.errors import VramchatError
from app.sources.model import ModelSource

if TYPE_CHECKING:
    from app.planning import Planned
    from planner.fit import FitResult
    from planner.model import ModelAnatomy
    from planner.speed import SpeedPrediction

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
    speed: SpeedPrediction | None = None  # app.speed.file_speed of this row's plan (None: not planned)
    best: bool = False

    @property
    def tokens_per_second(self) -> float | None:
        """Predicted decode at the start of a chat; None: unknown or still measuring."""
        return self.speed.decode_start.value if self.speed is not None else None

    @property
    def speed_cell(self) -> str:
        """The tok/s column's text: the same words the model list and --plan show for this file."""
        return self.speed.cell() if self.speed is not None else "-"

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
        from planner.offload import offload_badge

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
            offload_badge=offload_badge(plan),
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


def predicted_speed(planned: Planned) -> SpeedPrediction:
    """This plan's speed on the devices it was made for and this CPU: the `tok/s` column
    (`Planned.speed`, app.speed.file_speed: the figure the model list and --plan show for the file)."""
    return planned.speed


def plan_quants(
    sources: list[ModelSource],
    load: Callable[[ModelSource], ModelAnatomy],
    plan: Callable[[ModelSource, ModelAnatomy], Planned],
    progress: Callable[[int, int], None] | None = None,
    parallel: int = MAX_PARALLEL,
    on_row: Callable[[int, QuantRow], None] | None = None,
) -> QuantTable:
    """Read every model's header (in parallel threads) and plan each as soon as it is read (in this
    thread), then choose the best.

    `load` is app.sources.load_anatomy; `plan` solves one model for the devices and wishes at hand
    (app.planning.plan_source, the devices probed once for all). Blocking: the picker runs it in a
    worker. `progress(done, total)` is called in this thread as each model is planned, and
    `on_row(index, row)` with the row planned (or unreadable), its predicted tok/s with it."""
    from concurrent.futures import as_completed

    rows = [QuantRow(source) for source in sources]
    if sources:
        with ThreadPoolExecutor(max(1, min(parallel, len(sources)))) as pool:
            pending = {pool.submit(_read_one, source, load): index for index, source in enumerate(sources)}
            for done, future in enumerate(as_completed(pending), start=1):
                row = rows[pending[future]]
                row.anatomy, row.error = future.result()
                if row.anatomy is not None:
                    _plan_row(row, plan, speed=True)
                if on_row:
                    on_row(pending[future], row)
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


def _plan_row(row: QuantRow, plan: Callable[[ModelSource, ModelAnatomy], Planned], speed: bool) -> None:
    from planner.errors import PlannerError

    assert row.anatomy is not None
    try:
        planned = plan(row.source, row.anatomy)
        row.result = planned.fit
        row.speed = predicted_speed(planned) if speed else None
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
    i, why = _best_of(fits)
    # the same quant in one file rather than split in several (a split model's extra headers make it larger)
    whole_file = [j for j, r in fits if r.quant == rows[i].quant and len(r.source.files) < len(rows[i].source.files)]
    if whole_file:
        i = min(whole_file, key=lambda j: (len(rows[j].source.files), j))
    return i, why


def _best_of(fits: list[tuple[int, QuantRow]]) -> tuple[int, str]:

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


# -- one badge for a whole repo (the hub view's list of repos) -----------------------------------------


def representative(models: list[ModelSource]) -> ModelSource | None:
    """The model a repo is badged with before it is opened: its only one, its Q4_K_M (what llama.cpp's
    -hf takes), else the quant nearest Q4_K_M in quality (the smaller of two as near), else the middle
    one by size. None when it holds none that can be planned."""
    usable = [m for m in models if not m.problem]
    if len(usable) <= 1:
        return usable[0] if usable else None
    exact = [m for m in usable if m.quant == "Q4_K_M"]
    if exact:
        return min(exact, key=lambda m: m.size)
    ranked = [m for m in usable if m.quant in QUALITY_RANK]
    if ranked:
        return min(ranked, key=lambda m: (abs(QUALITY_RANK[m.quant] - GOOD_ENOUGH), m.size))
    by_size = sorted(usable, key=lambda m: m.size)
    return by_size[len(by_size) // 2]


@dataclass
class RepoFit:
    """A repo's badge for this machine: its representative quant planned, or why there is none."""

    repo_id: str
    quant: str = ""  # the quant the badge is for
    models: int = 0  # how many models the repo holds
    summary: ModelSummary | None = None
    problem: str = ""  # a short word for the badge column: access needed, no GGUF model ...
    error: str = ""  # the whole reason, one line


def repo_fit(
    repo_id: str,
    load: Callable[[ModelSource], ModelAnatomy],
    plan: Callable[[ModelSource, ModelAnatomy], Planned],
) -> RepoFit:
    """List the repo (the listing seen last when the hub cannot be reached), read its representative
    quant's header and plan it. Blocking (network): run it in a worker thread."""
    from app.sources import hub
    from app.sources.errors import Gated, NotFound, Unreachable
    from planner.errors import PlannerError

    def failed(exc: Exception, models: int = 0, quant: str = "") -> RepoFit:
        words = {Gated: "access needed", NotFound: "not found", Unreachable: "not reachable"}
        problem = next((w for kind, w in words.items() if isinstance(exc, kind)), "unreadable")
        message = str(getattr(exc, "problem", None) or exc)
        return RepoFit(repo_id, quant, models, problem=problem, error=message)

    try:
        models = hub.repo_models(hub.list_repo(repo_id))
    except VramchatError as exc:
        return failed(exc)
    choice = representative(models)
    if choice is None:
        why = models[0].problem if models else "the repository holds no GGUF model"
        return RepoFit(repo_id, "", len(models), problem="no GGUF model" if not models else "unreadable", error=why)
    row = QuantRow(choice)
    try:
        row.anatomy = load(choice)
    except (PlannerError, VramchatError) as exc:
        return failed(exc, len(models), row.quant)
    _plan_row(row, plan, speed=False)
    return RepoFit(repo_id, row.quant, len(models), row.summary, error=row.error)

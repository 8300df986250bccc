"""The solver: choose n_gpu_layers, context, KV type and flash attention for the memory at hand.

Preference, in order: every layer on the GPU; then the longest context up to
the one wanted; quantized KV cache only when it buys layers or context. Each
candidate is priced by the exact memory model (`planner.memory`), so every
configuration the solver proposes, alternatives included, is one the model
says fits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from planner.config import CTX_PAD, LoadConfig
from planner.errors import ConfigError
from planner.explain import beyond_training, no_fit_reasons, ops_on_cpu, over_budget, summary
from planner.free_lines import FreeLine
from planner.hardware import Device, Host
from planner.memory import MemoryPlan, plan_memory
from planner.model import ModelAnatomy
from planner.offload import the_gpu
from planner.projector import Projector
from planner.rpc import network_notes
from planner.units import format_size, round_up

# Without --ctx the planner aims for the trained context, but at most this many tokens.
DEFAULT_CONTEXT_CAP = 32768
# Below this the solver drops layers to the CPU rather than shortening the context further.
MIN_CONTEXT = 4096
# The micro-batches the solver tries, largest first. The compute buffer scales with the micro-batch
# (on a small model with a large vocabulary the logits of one micro-batch are most of it: the demo's
# 514.5 MiB at 512), so where compute decides the fit a smaller one buys layers or context, at the
# cost of reading prompts in smaller steps (slower prefill; decode is unchanged).
UBATCH_STEPS = (512, 256, 128)
SMALLEST_CONTEXT = 512


@dataclass(frozen=True)
class Wishes:
    """What the user asked for; None means the planner chooses."""

    n_ctx: int | None = None
    # q4_0 is allowed when asked for; by default the solver stops at the near-lossless q8_0
    kv_types: tuple[str, ...] = ("f16", "q8_0")
    flash_attn: str = "auto"  # auto, on, off
    # None: the solver's (512, or 256 / 128 when the compute buffer is what stops a fit); a number: as given
    n_batch: int | None = None
    n_ubatch: int | None = None
    n_seq_max: int = 1
    swa_full: bool = False
    margins: dict[str, int] = field(default_factory=dict)
    use_mmap: bool = True
    projector: Projector | None = None
    cpu_extra_buffers: bool | None = None  # None: this CPU's default (planner.weights.uses_cpu_extra_buffers)
    # --min-speed: the decode speed (tok/s at the start of a chat) a plan should reach, and how fast a
    # plan decodes on this machine (the app passes planner.speed's prediction; None where unknown)
    min_speed: float | None = None
    decode_speed: Callable[[MemoryPlan], float | None] | None = None


@dataclass
class Alternative:
    """Another configuration worth telling the user about, and why."""

    plan: MemoryPlan
    note: str


@dataclass
class FitResult:
    """The solver's answer: the plan, the reasons for it and the alternatives."""

    plan: MemoryPlan
    reasons: list[str]
    alternatives: list[Alternative]
    desired_ctx: int
    solved: bool = True  # False when the configuration was fixed by the user

    @property
    def verdict(self) -> str:
        return self.plan.verdict


def desired_context(model: ModelAnatomy, wishes: Wishes) -> int:
    if wishes.n_ctx:
        return wishes.n_ctx
    trained = model.n_ctx_train or DEFAULT_CONTEXT_CAP
    return min(trained, DEFAULT_CONTEXT_CAP)


def fixed_config(
    model: ModelAnatomy,
    gpus: list[Device],
    *,
    n_gpu_layers: int | None = None,
    n_ctx: int | None = None,
    type_k: str | None = None,
    type_v: str | None = None,
    flash_attn: bool | None = None,
    n_batch: int | None = None,
    n_ubatch: int | None = None,
    swa_full: bool | None = None,
    n_seq_max: int | None = None,
    n_cpu_moe: int | None = None,
    cpu_extra_buffers: bool | None = None,
) -> LoadConfig:
    """A configuration fixed by the user (CLI flags, picker knobs), with one set of defaults for what
    they leave out: every layer on the GPUs there are, the desired context, f16 K, flash attention on
    (as the solver prefers it), V as K with flash attention and f16 without."""
    fa = True if flash_attn is None else flash_attn
    ctk = type_k or "f16"
    ngl = model.n_layer + 1 if n_gpu_layers is None else min(n_gpu_layers, model.n_layer + 1)
    return LoadConfig(
        n_gpu_layers=ngl if gpus else 0,
        n_ctx=n_ctx if n_ctx is not None else desired_context(model, Wishes()),
        n_batch=n_batch or 512,
        n_ubatch=n_ubatch or 512,
        type_k=ctk,
        type_v=type_v or (ctk if fa else "f16"),
        flash_attn=fa,
        swa_full=bool(swa_full),
        n_seq_max=n_seq_max or 1,
        n_cpu_moe=n_cpu_moe or 0,
        cpu_extra_buffers=cpu_extra_buffers,
    )


class Candidate(NamedTuple):
    """One configuration the solver prices: GPU layers, context, KV type, flash attention, and the
    layers whose experts stay on the CPU."""

    ngl: int
    ctx: int
    kv: str
    fa: bool
    moe: int = 0


class _Pricer:
    """Memoised plan_memory for the solver's candidates."""

    def __init__(self, model: ModelAnatomy, gpus: list[Device], host: Host, wishes: Wishes) -> None:
        self.model, self.gpus, self.host, self.wishes = model, gpus, host, wishes
        self.cache: dict[Candidate, MemoryPlan | None] = {}

    def config(self, ngl: int, ctx: int, kv: str, fa: bool, op_offload: bool = True, moe: int = 0) -> LoadConfig:
        w = self.wishes
        return LoadConfig(
            n_gpu_layers=ngl,
            n_ctx=ctx,
            n_batch=w.n_batch or UBATCH_STEPS[0],
            n_ubatch=w.n_ubatch or UBATCH_STEPS[0],
            type_k=kv,
            type_v=kv if fa else "f16",
            flash_attn=fa,
            swa_full=w.swa_full,
            n_seq_max=w.n_seq_max,
            use_mmap=w.use_mmap,
            op_offload=op_offload,
            n_cpu_moe=moe,
            cpu_extra_buffers=w.cpu_extra_buffers,
        )

    def plan(self, ngl: int, ctx: int, kv: str, fa: bool, moe: int = 0) -> MemoryPlan | None:
        key = Candidate(ngl, ctx, kv, fa, moe)
        if key not in self.cache:
            self.cache[key] = self._price(key)
        return self.cache[key]

    def _price(self, c: Candidate) -> MemoryPlan | None:
        ngl, ctx, kv, fa, moe = c
        try:
            plan = plan_memory(
                self.model,
                self.config(ngl, ctx, kv, fa, moe=moe),
                self.gpus,
                self.host,
                self.wishes.margins,
                projector=self.wishes.projector,
            )
            if ngl == 0 and self.gpus and not plan.fits and plan.host.fits:
                # the GPU cannot hold the ops llama.cpp would offload to it: keep them on the CPU
                plan = plan_memory(
                    self.model,
                    self.config(ngl, ctx, kv, fa, op_offload=False),
                    self.gpus,
                    self.host,
                    self.wishes.margins,
                    projector=self.wishes.projector,
                )
            return plan
        except ConfigError:
            return None

    def fits(self, ngl: int, ctx: int, kv: str, fa: bool, moe: int = 0) -> bool:
        key = Candidate(ngl, ctx, kv, fa, moe)
        if key not in self.cache and not self._may_fit(key):
            return False
        plan = self.plan(ngl, ctx, kv, fa, moe)
        return plan is not None and plan.fits

    def _may_fit(self, c: Candidate) -> bool:
        """Weights, KV and output alone (no compute buffers): cheap, and a lower bound."""
        ngl, ctx, kv, fa, moe = c
        try:
            bound = plan_memory(
                self.model,
                self.config(ngl, ctx, kv, fa, moe=moe),
                self.gpus,
                self.host,
                self.wishes.margins,
                with_compute=False,
                projector=self.wishes.projector,
            )
        except ConfigError:
            return False
        if ngl == 0:
            return bound.host.fits
        return bound.fits

    def longest_context(self, ngl: int, lo: int, hi: int, kv: str, fa: bool) -> int | None:
        """Longest context in [lo, hi] (multiples of 256) that fits, by bisection."""
        lo, hi = _pad(lo), _pad(hi)
        if self.fits(ngl, hi, kv, fa):
            return hi
        if not self.fits(ngl, lo, kv, fa):
            return None
        while hi - lo > CTX_PAD:
            mid = _pad((lo + hi) // 2)
            if mid >= hi:
                mid = hi - CTX_PAD
            if self.fits(ngl, mid, kv, fa):
                lo = mid
            else:
                hi = mid
        return lo

    def most_layers(self, ctx: int, kv: str, fa: bool) -> int | None:
        """Most GPU layers that fit at this context, by bisection over n_gpu_layers."""
        top = self.model.n_layer + 1 if self.gpus else 0
        if self.fits(top, ctx, kv, fa):
            return top
        if not self.fits(0, ctx, kv, fa):
            return None
        lo, hi = 0, top
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.fits(mid, ctx, kv, fa):
                lo = mid
            else:
                hi = mid
        return lo


def _pad(n: int) -> int:
    """A context the solver tries: a multiple of llama.cpp's padding, at least one step."""
    return max(CTX_PAD, round_up(n, CTX_PAD))


def _flash_attn_options(wishes: Wishes, gpus: list[Device]) -> list[bool]:
    if wishes.flash_attn == "on":
        return [True]
    if wishes.flash_attn == "off":
        return [False]
    # auto: flash attention saves memory (no KQ matrix) and allows a quantized V cache
    return [True, False]


def solve(model: ModelAnatomy, gpus: list[Device], host: Host, wishes: Wishes | None = None) -> FitResult:
    """Choose the best configuration for these devices. Unless the micro-batch was given, a smaller
    one (UBATCH_STEPS) is tried when the default leaves the plan short of every layer on the GPU at
    the context wanted, and kept when it buys layers, context or a fit."""
    wishes = wishes or Wishes()
    if wishes.n_ubatch is not None:
        return _solve_at(model, gpus, host, wishes)
    steps = _ubatch_steps(model, wishes)
    batch = wishes.n_batch
    if steps[0] > UBATCH_STEPS[0]:  # a micro-batch beyond the default batch: the batch grows with it
        batch = max(batch or 0, steps[0])
    first = _solve_at(model, gpus, host, replace(wishes, n_ubatch=steps[0], n_batch=batch))
    best = first
    if len(steps) > 1 and first.plan.fits and not _smaller_could_buy(first, model, gpus, host, wishes, steps[-1]):
        return first  # what the smallest micro-batch frees buys nothing: no second and third search
    for ubatch in steps[1:]:
        if _complete(best, model, gpus):
            break
        batch = ubatch if wishes.n_batch is None else max(wishes.n_batch, ubatch)
        smaller = _solve_at(model, gpus, host, replace(wishes, n_ubatch=ubatch, n_batch=batch))
        if _worth_it(best, smaller):
            best = smaller
    if best is not first:
        best.reasons.insert(1, _ubatch_reason(first, best))
    return best


def _smaller_could_buy(
    result: FitResult, model: ModelAnatomy, gpus: list[Device], host: Host, wishes: Wishes, smallest: int
) -> bool:
    """Whether the memory the smallest micro-batch frees, device by device, could buy something: a
    layer more on a GPU, or a tenth more context where the context was shortened. One pricing of the
    same placement at the smallest micro-batch (a full search at each size costs twenty or more)."""
    if _complete(result, model, gpus):
        return False
    plan = result.plan
    try:
        small = plan_memory(
            model,
            plan.config.with_(n_ubatch=smallest, n_batch=smallest),
            gpus,
            host,
            wishes.margins,
            projector=wishes.projector,
        )
    except ConfigError:
        return False
    layers = [layer for layer in model.layers if not layer.is_mtp] or list(model.layers)
    one_layer = max((layer.weight_bytes for layer in layers), default=0) + plan.kv_bytes // max(len(layers), 1)
    all_layers = plan.layers_on_gpu >= (model.n_layer + 1 if gpus else 0)
    wanted = plan.kv_bytes // 10 if all_layers else one_layer
    return any(
        before.planned - after.planned >= wanted
        for before, after in zip([*plan.gpus, plan.host], [*small.gpus, small.host])
    )


def _ubatch_steps(model: ModelAnatomy, wishes: Wishes) -> tuple[int, ...]:
    """The micro-batches to try: UBATCH_STEPS, none smaller than the largest image when the model reads
    an image's tokens both ways (llama.cpp reads such an image in one micro-batch)."""
    if wishes.projector is None:
        return UBATCH_STEPS
    from planner.projectors.match import image_tokens_in_one_batch

    floor = image_tokens_in_one_batch(wishes.projector, model)
    return tuple(dict.fromkeys(max(step, floor) for step in UBATCH_STEPS))


def _complete(result: FitResult, model: ModelAnatomy, gpus: list[Device]) -> bool:
    """Nothing a smaller micro-batch could buy: it fits, every layer on the GPU, the context wanted."""
    plan = result.plan
    top = model.n_layer + 1 if gpus else 0
    return plan.fits and plan.layers_on_gpu >= top and plan.resolved.n_ctx >= _pad(result.desired_ctx)


# A smaller micro-batch reads prompts in smaller steps (on a GPU, several times slower): it is kept
# only for a fit, more layers on the GPU, the whole context wanted, or at least this much more context.
UBATCH_CONTEXT_GAIN = 1.10


def _worth_it(before: FitResult, after: FitResult) -> bool:
    """Whether the plan at a smaller micro-batch buys enough to pay for its slower prompt reading."""
    was, now = before.plan, after.plan
    if not now.fits:
        return False
    if not was.fits or now.layers_on_gpu > was.layers_on_gpu:
        return True
    if now.layers_on_gpu < was.layers_on_gpu:
        return False
    wanted = _pad(after.desired_ctx)
    gained = now.resolved.n_ctx > was.resolved.n_ctx
    return gained and (now.resolved.n_ctx >= wanted or now.resolved.n_ctx >= UBATCH_CONTEXT_GAIN * was.resolved.n_ctx)


def _ubatch_reason(before: FitResult, after: FitResult) -> str:
    """What the smaller micro-batch bought, and what it costs."""
    was, now = before.plan, after.plan
    ub = now.resolved.config.n_ubatch
    compute = sum(b.bytes for b in now.buffers if b.kind == "compute")
    compute_before = sum(b.bytes for b in was.buffers if b.kind == "compute")
    if not was.fits:
        bought = "without it nothing fits"
    elif now.layers_on_gpu > was.layers_on_gpu:
        bought = f"{now.layers_on_gpu} layers on {the_gpu(now)} instead of {was.layers_on_gpu}"
    else:
        bought = f"{now.resolved.n_ctx:,} tokens of context instead of {was.resolved.n_ctx:,}"
    return (
        f"Micro-batch {ub} instead of {UBATCH_STEPS[0]} (--ubatch {ub} --batch {now.resolved.config.n_batch}): "
        f"the compute buffer shrinks from {format_size(compute_before)} to {format_size(compute)}, so {bought}; "
        f"prompts are read {ub} tokens at a time (on a CPU about as fast, on a GPU more slowly; replies are "
        "written as fast)"
    )


def _solve_at(model: ModelAnatomy, gpus: list[Device], host: Host, wishes: Wishes) -> FitResult:
    """The solver for one micro-batch."""
    want = desired_context(model, wishes)
    floor = min(want, MIN_CONTEXT)
    pricer = _Pricer(model, gpus, host, wishes)
    fa_options = _flash_attn_options(wishes, gpus)
    kv_types = [k for k in wishes.kv_types] or ["f16"]
    fa = fa_options[0]

    top = model.n_layer + 1 if gpus else 0
    best_key = _full_offload(pricer, top, floor, want, kv_types, fa_options) if top else None
    if best_key is None and top and model.n_expert:
        # a mixture of experts: keep attention and the KV cache on the GPU, experts of the first
        # layers in host memory (llama.cpp's --n-cpu-moe), rather than dropping whole layers
        best_key = _experts_on_cpu(pricer, top, want, kv_types, fa_options)
    if best_key is None:
        # not every layer fits: keep the whole context wanted, and as many layers as fit with it
        best_key = _most_layers_at(pricer, want, kv_types, fa_options)
    if best_key is None:
        # the context wanted does not fit even on the host: the longest that does
        for kv in kv_types:
            ctx = pricer.longest_context(0, SMALLEST_CONTEXT, want, kv, fa)
            if ctx is not None:
                best_key = Candidate(0, ctx, kv, fa)
                break
    if best_key is None:
        plan = pricer.plan(model.n_layer + 1 if gpus else 0, floor, kv_types[0], fa)
        if plan is None:
            plan = plan_memory(model, pricer.config(0, floor, "f16", False), gpus, host, wishes.margins)
        reasons = no_fit_reasons(plan, SMALLEST_CONTEXT)
        return FitResult(plan, reasons, [], want)

    plan = pricer.plan(*best_key)
    assert plan is not None
    reasons = _reasons(plan, want, wishes, pricer, kv_types)
    if plan.config.n_cpu_moe:
        n_moe = plan.config.n_cpu_moe
        layers_alone = pricer.most_layers(plan.resolved.n_ctx, plan.resolved.type_k.name, plan.config.flash_attn)
        reasons.insert(
            1,
            f"Experts of the first {n_moe} of {model.n_layer} layers stay in host memory "
            f"(--n-cpu-moe {n_moe}); attention and the KV cache stay on the GPU"
            + (f", instead of only {layers_alone} whole layers on the GPU" if layers_alone else ""),
        )
    if wishes.min_speed and wishes.decode_speed is not None:
        faster, note = _meet_speed(pricer, plan, want, kv_types, fa_options, wishes.min_speed, wishes.decode_speed)
        if faster is not plan:
            plan = faster
            reasons = _reasons(plan, want, wishes, pricer, kv_types)
        reasons.insert(1, note)
    alternatives = _alternatives(plan, pricer, want, kv_types, fa_options)
    return FitResult(plan, reasons, alternatives, want)


def _meet_speed(
    pricer: _Pricer,
    plan: MemoryPlan,
    want: int,
    kv_types: list[str],
    fa_options: list[bool],
    min_speed: float,
    speed: Callable[[MemoryPlan], float | None],
) -> tuple[MemoryPlan, str]:
    """--min-speed: among the configurations that fit, one whose predicted decode at the start of a chat
    reaches `min_speed`, at the longest context. For one file the lever is the GPU layers: more of
    them, at the shorter context (or the quantized KV cache) that makes room for them. Decode speed
    rises with the layers on a GPU that is faster than the host, so the fewest layers that reach
    the wish are found by bisection, each at its longest context."""
    now = speed(plan)
    wish = f"--min-speed {min_speed:g}"
    if now is None:
        return plan, f"{wish}: this plan has no speed figure to compare (see the speed below)"
    if now >= min_speed:
        return plan, f"{wish}: the plan decodes about {now:,.0f} tok/s at the start of a chat"
    top = pricer.model.n_layer + 1 if pricer.gpus else 0
    ngl = plan.layers_on_gpu
    best: tuple[MemoryPlan, float] | None = None  # the fastest plan seen that fits
    found: MemoryPlan | None = None
    for kv in kv_types:
        for fa in fa_options:

            def at(layers: int, kv: str = kv, fa: bool = fa) -> tuple[MemoryPlan, float] | None:
                ctx = pricer.longest_context(layers, SMALLEST_CONTEXT, want, kv, fa)
                p = pricer.plan(layers, ctx, kv, fa) if ctx else None
                if p is None or not p.fits:
                    return None
                return p, speed(p) or 0.0

            layers = pricer.most_layers(SMALLEST_CONTEXT, kv, fa)  # the most that fit at any context
            most = at(layers) if layers is not None and layers > ngl else None
            if most is None or layers is None:
                continue
            if best is None or most[1] > best[1]:
                best = most
            if most[1] < min_speed:
                continue
            lo, hi = ngl, layers  # lo is too slow, hi reaches the wish
            while hi - lo > 1:
                mid = (lo + hi) // 2
                got = at(mid)
                if got is not None and got[1] >= min_speed:
                    hi = mid
                else:
                    lo = mid
            candidate = at(hi)
            if candidate is not None and (found is None or candidate[0].resolved.n_ctx > found.resolved.n_ctx):
                found = candidate[0]
    if found is not None:
        fast = speed(found) or 0.0
        return found, (
            f"{wish}: {found.layers_on_gpu} of {top} layers on {the_gpu(found)} at {found.resolved.n_ctx:,} tokens "
            f"decode about {fast:,.0f} tok/s (the longest context that fits with them); "
            f"the plan without the wish ({ngl} layers, {plan.resolved.n_ctx:,} tokens) decodes about {now:,.0f}"
        )
    if best is not None and best[1] > now:
        p, fastest = best
        return plan, (
            f"{wish}: nothing that fits decodes that fast; the fastest that fits is about {fastest:,.0f} tok/s "
            f"({p.layers_on_gpu} of {top} layers on {the_gpu(p)} at {p.resolved.n_ctx:,} tokens), "
            f"this plan about {now:,.0f}"
        )
    return plan, f"{wish}: nothing that fits decodes that fast; this plan decodes about {now:,.0f} tok/s"


def _full_offload(
    pricer: _Pricer, top: int, floor: int, want: int, kv_types: list[str], fa_options: list[bool]
) -> Candidate | None:
    """Every layer on the GPU at the longest context in [floor, want]; a quantized KV cache
    only if it buys context."""
    best: Candidate | None = None
    for kv in kv_types:
        for fa in fa_options:
            ctx = pricer.longest_context(top, floor, want, kv, fa)
            if ctx is not None:
                if best is None or ctx > best.ctx:
                    best = Candidate(top, ctx, kv, fa)
                break
        if best is not None and best.ctx >= _pad(want):
            break
    return best


def _experts_on_cpu(
    pricer: _Pricer, top: int, want: int, kv_types: list[str], fa_options: list[bool]
) -> Candidate | None:
    """Every layer on the GPU with the fewest layers' experts kept in host memory."""
    n_layer = pricer.model.n_layer
    ctx = _pad(want)
    for kv in kv_types:
        for fa in fa_options:
            if not pricer.fits(top, ctx, kv, fa, n_layer):
                continue
            lo, hi = 0, n_layer  # lo does not fit, hi fits
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if pricer.fits(top, ctx, kv, fa, mid):
                    hi = mid
                else:
                    lo = mid
            return Candidate(top, ctx, kv, fa, hi)
    return None


def _most_layers_at(pricer: _Pricer, want: int, kv_types: list[str], fa_options: list[bool]) -> Candidate | None:
    """As many layers as fit with the whole context; a quantized KV cache only if it buys layers."""
    top = pricer.model.n_layer + 1 if pricer.gpus else 0
    best: Candidate | None = None
    for kv in kv_types:
        for fa in fa_options:
            ngl = pricer.most_layers(want, kv, fa)
            if ngl is not None:
                if best is None or ngl > best.ngl:
                    best = Candidate(ngl, _pad(want), kv, fa)
                break
        if best is not None and best.ngl == top:
            break  # every layer already fits: a quantized cache has no layers to buy
    return best


def evaluate(
    model: ModelAnatomy,
    config: LoadConfig,
    gpus: list[Device],
    host: Host,
    margins: dict[str, int] | None = None,
    projector: Projector | None = None,
) -> FitResult:
    """A fixed configuration, priced as is (no solver)."""
    plan = plan_memory(model, config, gpus, host, margins, projector=projector)
    reasons: list[str | FreeLine] = [summary(plan)]
    overflow = beyond_training(plan)
    if overflow:
        reasons.append(overflow)
    on_cpu = ops_on_cpu(plan)
    if on_cpu:
        reasons.append(on_cpu)
    if not plan.fits:
        reasons += over_budget(plan)
    return FitResult(plan, reasons, [], config.n_ctx, solved=False)


def _reasons(plan: MemoryPlan, want: int, wishes: Wishes, pricer: _Pricer, kv_types: list[str]) -> list[str]:
    m, r = plan.model, plan.resolved
    reasons = [summary(plan)]
    if not wishes.n_ctx and m.n_ctx_train > want:
        reasons.append(
            f"Context aims at {want:,} tokens (the model was trained for {m.n_ctx_train:,}); ask for more with --ctx"
        )
    if r.n_ctx < _pad(want):
        reasons.append(f"Context shortened from {want:,} to {r.n_ctx:,} tokens to fit")
    overflow = beyond_training(plan)
    if overflow:
        reasons.append(overflow)
    if r.type_k.name != "f16":
        f16_ctx = pricer.longest_context(plan.layers_on_gpu, SMALLEST_CONTEXT, want, "f16", r.config.flash_attn)
        f16_ngl = pricer.most_layers(r.n_ctx, "f16", r.config.flash_attn)
        if f16_ngl is not None and f16_ngl < plan.layers_on_gpu:
            reasons.append(
                f"KV cache quantized to {r.type_k.name}: with f16 only {f16_ngl} layers fit on {the_gpu(plan)}"
            )
        elif f16_ctx:
            reasons.append(f"KV cache quantized to {r.type_k.name}: with f16 only {f16_ctx:,} tokens fit")
        else:
            reasons.append(f"KV cache quantized to {r.type_k.name}: f16 does not fit")
    for d in plan.gpus:
        if d.layers:
            reasons.append(
                FreeLine("gpu_budget", d.name, d.free, name=d.name, planned=d.planned, margin=d.margin, shared=d.shared)
            )
    reasons += network_notes(plan, pricer.gpus)
    host = plan.host
    reasons.append(FreeLine("host_budget", host.name, host.free, planned=host.planned, mapped=host.weights_mapped))
    if plan.verdict == "partial_gpu":
        reasons.append(
            f"{m.n_layer + 1 - plan.layers_on_gpu} layers run on the CPU to keep the whole "
            f"{r.n_ctx:,}-token context: expect slower generation"
        )
    on_cpu = ops_on_cpu(plan)
    if on_cpu:
        reasons.append(on_cpu)
    return reasons


def _alternatives(
    plan: MemoryPlan, pricer: _Pricer, want: int, kv_types: list[str], fa_options: list[bool]
) -> list[Alternative]:
    """Other configurations that fit and trade something: more context, more layers, no GPU."""
    out: list[Alternative] = []
    r = plan.resolved
    ngl, fa = plan.layers_on_gpu, r.config.flash_attn
    kv_now = r.type_k.name
    trained = pricer.model.n_ctx_train or want
    seen = {(ngl, r.n_ctx, kv_now, fa)}

    def add(p: MemoryPlan | None, note: str) -> None:
        if p is None or not p.fits:
            return
        key = (p.layers_on_gpu, p.resolved.n_ctx, p.resolved.type_k.name, p.resolved.config.flash_attn)
        if key not in seen:
            seen.add(key)
            out.append(Alternative(p, note))

    # more context from a quantized KV cache, keeping the layers where they are
    if r.n_ctx < trained:
        for kv in kv_types:
            if kv == kv_now or kv == "f16":
                continue
            ctx = pricer.longest_context(ngl, r.n_ctx, trained, kv, True)
            if ctx and ctx > r.n_ctx:
                add(pricer.plan(ngl, ctx, kv, True), f"with {kv} KV cache: {ctx:,} tokens")
        # the whole trained context, even if it costs layers
        layers = pricer.most_layers(trained, kv_now, fa)
        if layers is not None and layers < ngl:
            fewer = pricer.plan(layers, trained, kv_now, fa)
            add(
                fewer,
                f"the full trained context ({trained:,} tokens) with {layers} of "
                f"{pricer.model.n_layer + 1} layers on {the_gpu(fewer)}",
            )
    # full-precision KV at a shorter context
    if kv_now != "f16":
        ctx = pricer.longest_context(ngl, SMALLEST_CONTEXT, r.n_ctx, "f16", fa)
        if ctx and ctx < r.n_ctx:
            add(pricer.plan(ngl, ctx, "f16", fa), f"with f16 KV cache (full precision): {ctx:,} tokens")
    # every layer on the GPU, at a shorter context
    top = pricer.model.n_layer + 1 if pricer.gpus else 0
    if 0 < ngl < top or (ngl == 0 and top):
        ctx = pricer.longest_context(top, SMALLEST_CONTEXT, r.n_ctx, kv_now, fa)
        if ctx:
            every = pricer.plan(top, ctx, kv_now, fa)
            add(every, f"every layer on {the_gpu(every)} at {ctx:,} tokens")
    # no GPU at all
    if ngl > 0:
        ctx = pricer.longest_context(0, SMALLEST_CONTEXT, want, kv_now, fa)
        if ctx:
            add(pricer.plan(0, ctx, kv_now, fa), f"CPU only: {ctx:,} tokens")
    return out[:4]

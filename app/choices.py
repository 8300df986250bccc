"""The picker's knobs (context, KV type, GPU layers, flash attention) turned into a plan.

Blank knobs are the solver's to choose. GPU layers fixed by hand means a fixed
configuration, priced as given (the same as `--plan --ngl N`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner.errors import ConfigError

if TYPE_CHECKING:  # the solver is imported when a plan is made, not when the picker is drawn
    from planner.fit import FitResult
    from planner.hardware import Device, Host
    from planner.model import ModelAnatomy

KV_CHOICES = ("auto", "f16", "q8_0", "q4_0")
FA_CHOICES = ("auto", "on", "off")
MAX_CONTEXT = 10_000_000


@dataclass(frozen=True)
class PlanChoice:
    n_ctx: int | None = None
    kv: str = "auto"
    n_gpu_layers: int | None = None
    flash_attn: str = "auto"

    @property
    def is_default(self) -> bool:
        return self == PlanChoice()


def parse_choice(ctx: str, kv: str, ngl: str, fa: str) -> PlanChoice:
    """From the picker's fields; raises ConfigError with a readable reason."""

    def number(text: str, what: str) -> int | None:
        text = text.strip().replace(",", "").replace("_", "")
        if not text or text.lower() == "auto":
            return None
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{what}: {text!r} is not a whole number") from None

    n_ctx = number(ctx, "context")
    if n_ctx is not None and not 256 <= n_ctx <= MAX_CONTEXT:
        raise ConfigError(f"context must be between 256 and {MAX_CONTEXT:,} tokens")
    n_gpu_layers = number(ngl, "GPU layers")
    if n_gpu_layers is not None and n_gpu_layers < 0:
        raise ConfigError("GPU layers cannot be negative")
    if kv not in KV_CHOICES:
        raise ConfigError(f"unknown KV cache type {kv!r}")
    if fa not in FA_CHOICES:
        raise ConfigError(f"flash attention is auto, on or off, not {fa!r}")
    return PlanChoice(n_ctx, kv, n_gpu_layers, fa)


def plan_for(model: ModelAnatomy, gpus: list[Device], host: Host, choice: PlanChoice) -> FitResult:
    """Solve (blank knobs) or evaluate (GPU layers fixed); ConfigError for what llama.cpp refuses."""
    from planner.fit import Wishes, evaluate, fixed_config, solve

    if choice.n_gpu_layers is None:
        kv_types = (choice.kv,) if choice.kv != "auto" else Wishes().kv_types
        return solve(model, gpus, host, Wishes(n_ctx=choice.n_ctx, kv_types=kv_types, flash_attn=choice.flash_attn))
    fa = None if choice.flash_attn == "auto" else choice.flash_attn == "on"
    kv = "f16" if choice.kv == "auto" else choice.kv
    n_ctx = choice.n_ctx
    if n_ctx is None:  # the longest context the solver finds for this KV type
        wished = "off" if fa is False else "on"
        n_ctx = solve(model, gpus, host, Wishes(kv_types=(kv,), flash_attn=wished)).plan.resolved.n_ctx
    config = fixed_config(model, gpus, n_gpu_layers=choice.n_gpu_layers, n_ctx=n_ctx, type_k=kv, flash_attn=fa)
    return evaluate(model, config, gpus, host)

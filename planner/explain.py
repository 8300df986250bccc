"""Plans in words: the headline the picker, the dashboard and the solver's reasons share."""

from __future__ import annotations

from planner.free_lines import FreeLine
from planner.hardware import format_size
from planner.memory import MemoryPlan
from planner.offload import offload_place, offload_short

THIS_CPU = "this machine's CPU"


def headline(plan: MemoryPlan) -> str:
    """The configuration in one line: context, KV type, layers on the GPU, flash attention."""
    r = plan.resolved
    on = offload_short(plan) or "GPU"
    return (
        f"{r.n_ctx:,} tokens · KV {r.type_k.name} · {plan.layers_on_gpu}/{plan.model.n_layer + 1} layers on {on} · "
        f"flash attention {'on' if r.config.flash_attn else 'off'}"
    )


def summary(plan: MemoryPlan) -> str:
    m, r = plan.model, plan.resolved
    units = m.n_layer + 1
    lent = offload_place(plan)  # a remote CPU holds layers: name it, and call this one "this machine's CPU"
    gpus = lent or ", ".join(d.name for d in plan.gpus if d.layers)
    where = {
        "full_gpu": f"all {units} layers (the output layer included) on {gpus}",
        "partial_gpu": (
            f"all {units} layers on {gpus}, the experts of {r.config.n_cpu_moe} of them in host memory"
            if r.config.n_cpu_moe and plan.layers_on_gpu >= units
            else f"{plan.layers_on_gpu} of {units} layers on {lent or 'the GPU'}, "
            f"{units - plan.layers_on_gpu} on {THIS_CPU if lent else 'the CPU'}"
        ),
        "cpu_only": "every layer on the CPU",
        "no_fit": "does not fit",
    }[plan.verdict]
    kv = r.type_k.name if r.type_k is r.type_v else f"{r.type_k.name}/{r.type_v.name}"
    kv_words = f"KV cache {kv} ({format_size(plan.kv_bytes)})" if plan.kv.tensors else "no KV cache"
    return f"{where}; context {r.n_ctx:,} tokens, {kv_words}, flash attention {'on' if r.config.flash_attn else 'off'}"


def beyond_training(plan: MemoryPlan) -> str | None:
    """A warning when each sequence's context is longer than the model was trained for (llama.cpp
    warns "possible training context overflow" and runs it): quality falls past the trained length
    unless RoPE scaling stretches the positions. llama.cpp's YaRN flags are the usual cure."""
    m, r = plan.model, plan.resolved
    per_sequence = r.n_ctx // max(r.config.n_seq_max, 1) if not r.config.kv_unified else r.n_ctx
    if not m.n_ctx_train or per_sequence <= m.n_ctx_train:
        return None
    scale = -(-per_sequence // m.n_ctx_train)  # ceiling
    scaling = m.metadata.get(f"{m.architecture}.rope.scaling.type")
    if scaling and scaling != "none":
        cure = f"the file sets {scaling} RoPE scaling, which llama.cpp applies"
    else:
        cure = (
            f"for longer contexts llama.cpp users set RoPE scaling: --rope-scaling yarn --rope-scale {scale} "
            f"--yarn-orig-ctx {m.n_ctx_train}"
        )
    return (
        f"Context {per_sequence:,} tokens is beyond the {m.n_ctx_train:,} the model was trained for: llama.cpp "
        f"runs it, but answers degrade past the trained length ({cure})"
    )


def ops_on_cpu(plan: MemoryPlan) -> str | None:
    """Which of the model's ops run on the CPU because a device refused them, and what that costs: the graph's
    splits (each a hand-over between devices, with its copies) and the compute buffers, against the device
    running them."""
    found = plan.ops_on_cpu
    if found is None:
        return None
    names = ", ".join(f"{op} ({n} node{'s' if n != 1 else ''})" for op, _, n in found.ops)
    devices = sorted({device for _, device, _ in found.ops})
    cost = [f"host compute {_signed(found.host_compute)}"]
    cost += [f"{device} compute {_signed(delta)}" for device, delta in found.device_compute]
    return (
        f"On the CPU: {names}, which {' and '.join(devices)} does not run at these shapes; the graph splits "
        f"{found.splits} ways instead of {found.splits_on_device} (each split a hand-over between devices), "
        f"{', '.join(cost)} against the device running them"
    )


def _signed(n: int) -> str:
    return f"+{format_size(n)}" if n >= 0 else f"-{format_size(-n)}"


def over_budget(plan: MemoryPlan) -> list[str]:
    out: list[str] = []
    for d in [*plan.gpus, plan.host]:
        if d.planned and not d.fits:
            values = {"name": d.name, "planned": d.planned, "margin": d.margin, "shared": d.shared}
            out.append(FreeLine("over_budget", d.name, d.free, **values))
    return out


def no_fit_reasons(plan: MemoryPlan, floor: int) -> list[str]:
    return [
        f"Nothing fits: even {floor:,} tokens with every layer on the CPU is too large.",
        *over_budget(plan),
        "Free memory (close other programs), pick a smaller quantization, or load anyway at your own risk.",
    ]

"""The plan as llama.cpp's own command-line flags, so that llama-server or llama-cli runs the same
configuration; and back, for checking that those flags mean what the plan means."""

from __future__ import annotations

from typing import Any

from planner.config import LoadConfig
from planner.memory import MemoryPlan

# flags that take a value, as llama.cpp's common/arg.cpp names them -> LoadConfig field
_VALUED = {
    "-ngl": "n_gpu_layers",
    "-c": "n_ctx",
    "-b": "n_batch",
    "-ub": "n_ubatch",
    "-ctk": "type_k",
    "-ctv": "type_v",
    "-np": "n_seq_max",
    "--n-cpu-moe": "n_cpu_moe",
}
_SWITCHES = {
    "--swa-full": ("swa_full", True),
    "--kv-unified": ("kv_unified", True),
    "--no-mmap": ("use_mmap", False),
    "-nkvo": ("offload_kqv", False),
    "--no-op-offload": ("op_offload", False),
    "-nr": ("cpu_extra_buffers", False),
    "--repack": ("cpu_extra_buffers", True),
}


def to_llama_args(
    plan: MemoryPlan, model_path: str, mmproj: str | None = None, image_max_tokens: int | None = None
) -> list[str]:
    """llama-server / llama-cli flags for the plan's configuration (as resolved: the padded context)."""
    c, r = plan.config, plan.resolved
    out = [
        *model_flags(model_path),
        "-ngl",
        str(r.n_gpu_layers if plan.gpus else 0),
        "-c",
        str(r.n_ctx),
        "-b",
        str(c.n_batch),
        "-ub",
        str(c.n_ubatch),
        "-ctk",
        c.type_k,
        "-ctv",
        c.type_v,
        "-fa",
        "on" if c.flash_attn else "off",
    ]
    if c.n_seq_max > 1:
        out += ["-np", str(c.n_seq_max)]
    if c.kv_unified:
        out.append("--kv-unified")
    if c.swa_full:
        out.append("--swa-full")
    if c.tensor_split and len(plan.gpus) > 1:
        out += ["-ts", ",".join(f"{x:g}" for x in c.tensor_split)]
    if c.n_cpu_moe:
        out += ["--n-cpu-moe", str(c.n_cpu_moe)]
    if c.cpu_extra_buffers is False:
        out.append("-nr")
    if not c.use_mmap:
        out.append("--no-mmap")
    if not c.offload_kqv:
        out.append("-nkvo")
    if not c.op_offload:
        out.append("--no-op-offload")
    servers = list(dict.fromkeys(d.description for d in plan.gpus if d.backend == "rpc"))
    if servers:  # the devices RPC servers lend, first in llama.cpp's list as in the plan
        out += ["--rpc", ",".join(servers)]
    if mmproj:
        out += ["--mmproj", mmproj]
        if image_max_tokens:
            out += ["--image-max-tokens", str(image_max_tokens)]
    return out


def model_flags(model_path: str) -> list[str]:
    """How llama.cpp names the model: -m PATH, -mu URL (a file at an URL), or -hfr ORG/REPO -hff FILE
    (a file of a Hugging Face repo, named hf:ORG/REPO/FILE as vramchat names it)."""
    if model_path.startswith(("http://", "https://")):
        return ["-mu", model_path]
    if model_path.startswith("hf:"):
        parts = model_path[3:].split("/", 2)
        if len(parts) == 3:
            repo = f"{parts[0]}/{parts[1]}".split("@", 1)[0]
            return ["-hfr", repo, "-hff", parts[2]]
    return ["-m", model_path]


def from_llama_args(args: list[str]) -> tuple[str, LoadConfig]:
    """The model path and the configuration llama.cpp would run for these flags (the ones above)."""
    values: dict[str, Any] = {"n_gpu_layers": 0}  # LoadConfig's fields by name (Any: each has its own type)
    path = ""
    hub: dict[str, str] = {}
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in ("-m", "-mu"):
            path, i = args[i + 1], i + 2
        elif flag in ("-hfr", "-hff"):
            hub[flag], i = args[i + 1], i + 2
        elif flag == "-fa":
            values["flash_attn"], i = args[i + 1] == "on", i + 2
        elif flag == "-ts":
            values["tensor_split"], i = tuple(float(x) for x in args[i + 1].split(",")), i + 2
        elif flag in ("--mmproj", "--rpc", "--image-max-tokens"):  # what is loaded beside the model, and where
            i += 2
        elif flag in _VALUED:
            field = _VALUED[flag]
            raw = args[i + 1]
            values[field] = raw if field in ("type_k", "type_v") else int(raw)
            i += 2
        elif flag in _SWITCHES:
            field, value = _SWITCHES[flag]
            values[field] = value
            i += 1
        else:
            raise ValueError(f"unknown flag {flag!r}")
    if hub:
        path = f"hf:{hub.get('-hfr', '')}/{hub.get('-hff', '')}"
    return path, LoadConfig(**values)

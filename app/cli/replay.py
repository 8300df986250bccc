"""`--plan MODEL --json` planned before, said again without the planner.

Importing the planner alone costs a plan's start several times what Python's own start does
(forty dataclasses, the device probes' modules). Yet a second plan of the same file on the same
machine is, byte for byte, the first one, except for the figures of free memory, and free memory
enters a plan only through its fit decisions (`planner.memory.recording_fits`): the plan stays
the same for any free memory that decides each of them the same way. So the first run keeps its
output with the bounds on free memory its decisions set, and the sentences and fields that
quote free memory marked (`planner.free_lines.FreeLine`); a later run with everything else the
same and its free memory within the bounds prints that output, said again for the memory free
now, without importing the planner, the device probes or the GGUF reader.

Everything else is part of the key, compared whole: the command line, the working folder, the
environment variables vramchat, llama.cpp and ggml read, the settings file, the model's files
(real path, size, modification time), the code of `app` and `planner` (every file's size and
time), and what the device probe reads: the llama.cpp libraries (names, sizes, times), the CPU
(/proc/cpuinfo's identity and flags), total RAM and the marks of a GPU driver, and the speed
figures the plan quotes (this machine's probe, the replies learned from) and what loads taught the
planner (app.devices.learned_buffers). A run is replayed
only where the probe is that simple: Linux, llama.cpp built without a GPU backend, no GPU driver,
no RPC server, no simulated devices; elsewhere the plan is made as usual. A cache that cannot
be read or written is ignored.
"""

from __future__ import annotations

import json
import os
import sys

from app.caches.files import code_files, files_under

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: its import is a tenth of the budget
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

FOLDER = "replay"
# app.devices.learned_buffers.FILE_NAME, named here: importing that module imports the planner (a test
# keeps them in step)
LEARNED_FILE = "learned-buffers.json"
FORMAT = 1
MAX_FILES = 500
# what the device probe looks for before asking NVML and pyrsmi (app.devices.nvml, app.devices.rocm;
# a test keeps them in step): where any exists, the probe is not this simple and nothing is replayed
DRIVER_MARKS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg", "/sys/module/amdgpu", "/dev/kfd")
SETTINGS_FILE = "settings.json"  # app.settings.SETTINGS_FILE (a test holds them equal)
_ENV_PREFIXES = ("VRAMCHAT_", "LLAMA_", "GGML_", "XDG_", "HF_", "CUDA_", "HIP_", "ROCR_")
_CPU_FIELDS = ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU architecture", "CPU part")
_MARK = "$replay"
HOST = "CPU"


def _cpu_identity() -> list[str]:
    """The first processor's identity and flags (what ggml's CPU features follow), not its clock."""
    out = []
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                break
            name = line.split(":", 1)[0].strip()
            if name in _CPU_FIELDS:
                out.append(line.strip())
    return out


def _meminfo() -> tuple[int, int]:
    """(total, available) RAM as the host probe reads it (app.devices.host._meminfo)."""
    with open("/proc/meminfo", encoding="latin-1") as handle:
        fields = dict(line.split(":", 1) for line in handle if ":" in line)
    return int(fields["MemTotal"].split()[0]) * 1024, int(fields["MemAvailable"].split()[0]) * 1024


def _library_dir() -> str | None:
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return override
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return None
    return os.path.join(os.path.dirname(spec.origin), "lib")


def _speed_files() -> list[tuple[str, int, int]]:
    """The speed figures a plan quotes (app.speed.machine, app.speed.learn): a new probe or a reply
    learned from makes the kept plan's `speed` stale."""
    from app.paths import cache_dir

    folder = cache_dir() / "speed"
    return files_under(str(folder)) if folder.is_dir() else []


def _learned_files() -> list[tuple[str, int, int]]:
    """What loads taught the planner (app.devices.learned_buffers): a load that allocated more than the
    rules said changes the next plan of that model, so a kept plan is stale once the lessons change."""
    from app.paths import data_dir

    path = data_dir() / LEARNED_FILE
    try:
        st = os.stat(path)
    except OSError:
        return []
    return [(str(path), st.st_size, st.st_mtime_ns)]


def _model_files(path: str) -> list[tuple[str, int, int]]:
    """The model's files as the reader opens them: the file, or every shard of a split model."""
    from planner.units import SPLIT_NAME

    folder, name = os.path.split(os.path.realpath(path))
    match = SPLIT_NAME.match(name)
    names = [name]
    if match and int(match["count"]) > 1:
        count = int(match["count"])
        names = [f"{match['stem']}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
    out = []
    for shard in names:
        st = os.stat(os.path.join(folder, shard))
        out.append((os.path.join(folder, shard), st.st_size, st.st_mtime_ns))
    return out


def _code() -> list[Any]:
    import app
    import planner

    return [code_files(os.path.dirname(app.__file__)), code_files(os.path.dirname(planner.__file__))]


def key_for(words: list[str]) -> tuple[dict[str, Any], int] | None:
    """(the key, the host's free memory now) for the command line `words`, where the device probe is
    simple enough to be replayed; else None. The key holds the words as given: a replay needs no
    parsing (whether they ask for a plan that can be replayed is known when it is kept)."""
    if not sys.platform.startswith("linux"):
        return None
    env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES) or k == "HOME"}
    if env.get("VRAMCHAT_DEVICES", "").strip() or env.get("VRAMCHAT_RPC", "").strip():
        return None
    if any(os.path.exists(mark) for mark in DRIVER_MARKS):
        return None
    try:
        from app.paths import config_dir

        settings_path = config_dir() / SETTINGS_FILE
        try:
            settings = settings_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            settings = None
        lib = _library_dir()
        if lib is None:
            return None
        total, free = _meminfo()
        key = {
            "format": FORMAT,
            "python": sys.version,
            "words": list(words),
            "cwd": os.getcwd(),
            "env": sorted(env.items()),
            "settings": settings,
            "code": _code(),
            "llama_cpp": [lib, files_under(lib)],
            "cpu": _cpu_identity(),
            "ram": total,
            "speed": _speed_files(),
            "learned": _learned_files(),
        }
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return key, free


def _entry_path(key: dict[str, Any]) -> Any:
    import zlib

    from app.paths import cache_dir

    # the entry holds its whole key: the name only spreads entries (the devices' part is not in it)
    text = json.dumps([key["words"], key["cwd"]]).encode()
    return cache_dir() / FOLDER / f"{zlib.crc32(text):08x}{zlib.adler32(text):08x}.json"


def _render(node: Any, free: int, total: int) -> Any:
    if isinstance(node, dict):
        mark = node.get(_MARK)
        if mark == "free":
            return free
        if mark == "held":
            return max(total - free, 0)
        if mark == "line":
            from planner.free_lines import say

            return say(node["kind"], free, node["values"])
        return {k: _render(v, free, total) for k, v in node.items()}
    if isinstance(node, list):
        return [_render(v, free, total) for v in node]
    return node


def replay(key: dict[str, Any], free: int, resolve: Callable[[str], str]) -> int | None:
    """Print the plan kept under `key` for `free` bytes of host RAM free; its exit status, or None
    when there is none, it was made for other inputs, or `free` is beyond its bounds. `resolve`
    turns the model's word into its path (the demo's file) as the plan does."""
    try:
        entry = json.loads(_entry_path(key).read_bytes())
        if entry.get("key") != json.loads(json.dumps(key)):
            return None
        word, path, files = entry["model"]
        if resolve(key["words"][word]) != path or [list(f) for f in _model_files(path)] != files:
            return None
        low, high = entry["bounds"]
        if not (low <= free and (high is None or free < high)):
            return None
        data = _render(entry["template"], free, key["ram"])
        code = int(entry["exit"])
    except Exception:  # anything amiss in a cache only means planning as usual
        return None
    print(json.dumps(data, indent=2))
    return code


def _template(node: Any, free: int) -> Any:
    """`node` with what quotes the host's free memory marked; raises ValueError for anything that
    quotes another device's."""
    from planner.free_lines import FreeLine

    if isinstance(node, FreeLine):
        if node.device != HOST or node.free != free:
            raise ValueError(f"a sentence quotes {node.device}'s free memory")
        return {_MARK: "line", "kind": node.kind, "values": node.values}
    if isinstance(node, dict):
        return {k: _template(v, free) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_template(v, free) for v in node]
    return node


def keep(
    key: dict[str, Any],
    args: Any,
    path: str,
    data: dict[str, Any],
    fit_log: list[tuple[str, int, bool]],
    report: Any,
    exit_code: int,
) -> None:
    """Keep the plan `data` of the model at `path` (before it is printed) for later runs with the
    same key, when the command line asks for nothing else than a plan (no check by llama.cpp, no
    projector, no simulated or remote devices) and the plan depends on free memory only as this
    module can say again: the host's, through its fit decisions and the marked fields."""
    from app.devices import ggml
    from app.devices.held import FROM_HOST
    from app.devices.probes import HOST as PROBE_HOST
    from app.rpc.endpoint import configured_endpoints

    if not (args.plan and args.json) or args.verify or args.llama_args or args.mmproj or args.models_dir:
        return
    if args.vram is not None or args.ram is not None or (args.rpc or "none").strip().lower() != "none":
        return
    if key["words"].count(args.model) != 1:
        return  # which word names the model must be plain
    if "/" not in args.model and ":" not in args.model and not os.path.exists(args.model):
        from app.demo import DEMO_NAMES

        if args.model not in DEMO_NAMES:
            return  # a name the list shows: looked up in its folders anew by each plan, never said again
    host = report.host
    if report.gpus or report.simulated or report.warnings or report.mismatches or configured_endpoints():
        return
    if ggml.probe_out_of_process() or host.total != key["ram"]:
        return
    held = report.held.get(PROBE_HOST)
    if held is None or held.source != FROM_HOST or held.bytes != max(host.total - host.free, 0):
        return
    if any(name != HOST for name, _, _ in fit_log):
        return
    low = max((need for _, need, ok in fit_log if ok), default=0)
    high = min((need for _, need, ok in fit_log if not ok), default=None)
    if not (low <= host.free and (high is None or host.free < high)):
        return  # cannot happen: the decisions were made with this free memory
    try:
        template = _template(data, host.free)
        h = template["host"]
        if h["free"] != host.free or h["held_by_others"] != held.bytes or template["devices"]:
            return
        h["free"], h["held_by_others"] = {_MARK: "free"}, {_MARK: "held"}
        # said again for the same free memory, the template must give back exactly what is printed
        if json.dumps(_render(template, host.free, host.total)) != json.dumps(data):
            return
        model = [key["words"].index(args.model), path, _model_files(path)]
        # the speed figures as the plan read them: a probe run or a reply learned during this plan counts
        key = dict(key, speed=_speed_files())
        text = json.dumps({"key": key, "model": model, "bounds": [low, high], "exit": exit_code, "template": template})
    except (OSError, ValueError, KeyError, TypeError):
        return
    from app.caches.files import write_atomically

    write_atomically(_entry_path(key), text.encode(), MAX_FILES)

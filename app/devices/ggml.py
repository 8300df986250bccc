"""What llama.cpp itself sees: the ggml device API of the libggml that llama-cpp-python ships.

Loaded through ctypes straight from the llama_cpp package folder, without
importing llama_cpp (that would pull in numpy and the whole binding). The same
file is the one llama_cpp loads later, so the process holds one registry of
backends and the telemetry reads the devices the engine allocates on.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import replace

from app.devices.buffer_limits import read_limits
from app.devices.ggml_device import DEVICE_TYPES, GPU_TYPES, GGMLDevice
from app.native import IN_PROCESS_ENV, DeviceProps, GGMLUnavailable, libraries, library_dir, library_names


def _device(ggml: ctypes.CDLL, index: int) -> GGMLDevice:
    dev = ggml.ggml_backend_dev_get(index)
    props = DeviceProps()  # zeroed: backends that do not know a device id leave it NULL
    ggml.ggml_backend_dev_get_props(dev, ctypes.byref(props))
    kind = DEVICE_TYPES.get(props.type, "unknown")
    limits = read_limits(ggml, dev) if kind in GPU_TYPES else None
    return GGMLDevice(
        name=(props.name or b"?").decode(errors="replace"),
        description=(props.description or b"").decode(errors="replace"),
        type=kind,
        free=int(props.memory_free),
        total=int(props.memory_total),
        device_id=props.device_id.decode(errors="replace").lower() if props.device_id else None,
        buffer_alignment=limits.alignment if limits else None,
        buffer_max_size=limits.max_size if limits else None,
        host_buffer=limits.host_buffer if limits else "",
        host_alignment=limits.host_alignment if limits else None,
        max_tensor_bytes=limits.max_tensor if limits else None,
    )


# --- keeping GPU backends out of the app's own process ------------------------------------------
# Loading a GPU backend initialises its runtime in the caller: a CUDA context alone takes hundreds
# of MiB of VRAM that the model could use. So where llama-cpp-python was built with a GPU backend,
# the app asks llama.cpp about devices in a short-lived child process, and reads GPU memory for the
# telemetry through the vendor libraries (NVML, pyrsmi); only the engine process loads backends.

GPU_BACKEND_LIBRARIES = (
    "ggml-cuda",
    "ggml-hip",
    "ggml-vulkan",
    "ggml-metal",
    "ggml-sycl",
    "ggml-opencl",
    "ggml-musa",
    "ggml-cann",
)


def gpu_backend_libraries() -> list[str]:
    """The GPU backends this llama-cpp-python ships as libraries (none in a CPU build)."""
    try:
        folder = library_dir()
    except GGMLUnavailable:
        return []
    return [
        base
        for base in GPU_BACKEND_LIBRARIES
        if any(os.path.exists(os.path.join(folder, name)) for name in library_names(base))
    ]


def probe_out_of_process() -> bool:
    """Whether this process should leave llama.cpp's GPU backends unloaded."""
    return os.environ.get(IN_PROCESS_ENV) != "1" and bool(gpu_backend_libraries())


_last_devices: list[GGMLDevice] = []


def _probe_child() -> tuple[list[GGMLDevice], frozenset[str]]:
    """llama.cpp's devices and CPU features, asked in a child process (`python -m app.devices.ggml`)."""
    import json
    import subprocess

    from app.children import child_env

    env = child_env(None, **{IN_PROCESS_ENV: "1"})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "app.devices.ggml"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GGMLUnavailable(f"the device probe process failed: {exc}") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        detail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise GGMLUnavailable(f"the device probe process failed: {detail}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    devices = [GGMLDevice(**d) for d in data["devices"]]
    return devices, frozenset(data["features"])


def list_devices() -> list[GGMLDevice]:
    """Every device llama.cpp would use, with its free and total memory."""
    global _last_devices
    if probe_out_of_process():
        devices, features = _probe_child()
        _features_cache[:] = [features]
        _last_devices = devices
        devices = _free_without_probe_context(devices)
    else:
        from app.devices.identity import enrich

        ggml, _ = libraries()
        devices = enrich([_device(ggml, i) for i in range(ggml.ggml_backend_dev_count())])
    _last_devices = devices
    return devices


def last_devices() -> list[GGMLDevice]:
    """The devices llama.cpp listed last in this process (asked again when none were)."""
    return _last_devices or list_devices()


def _free_without_probe_context(devices: list[GGMLDevice]) -> list[GGMLDevice]:
    """The probe child counted its own CUDA context (518 MiB on an H100) as used while it asked; NVML
    and pyrsmi read the GPU without a context of ours, so their free memory is what a load can have.
    Not on Windows: there llama.cpp's free is the WDDM budget, up to 3 GiB below NVML's, and a load
    gets that budget (app.devices.free_memory says so)."""
    if sys.platform == "win32":
        return devices
    try:
        vendor = _vendor_gpu_memory()
    except Exception:  # a vendor library that misbehaves: llama.cpp's own figure stands
        return devices
    return [replace(d, free=vendor[d.name][0]) if d.name in vendor and d.is_gpu else d for d in devices]


def gpu_memory() -> dict[str, tuple[int, int]]:
    """name -> (free, total) of the GPUs only: the cheap call the telemetry makes twice a second."""
    if probe_out_of_process():
        return _vendor_gpu_memory()
    ggml, _ = libraries()
    out: dict[str, tuple[int, int]] = {}
    for i in range(ggml.ggml_backend_dev_count()):
        dev = ggml.ggml_backend_dev_get(i)
        if DEVICE_TYPES.get(ggml.ggml_backend_dev_type(dev)) not in GPU_TYPES:
            continue
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        ggml.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        name = (ggml.ggml_backend_dev_name(dev) or b"?").decode(errors="replace")
        out[name] = (int(free.value), int(total.value))
    return out


_FEATURES = (
    "avx",
    "avx2",
    "avx512",
    "fma",
    "f16c",
    "neon",
    "dotprod",
    "matmul_int8",
    "sve",
    "avx512_vnni",
    "avx512_bf16",
    "amx_int8",
)


_features_cache: list[frozenset[str]] = []


def _vendor_gpu_memory() -> dict[str, tuple[int, int]]:
    """GPU memory through NVML and pyrsmi, matched to the devices llama.cpp listed last (by PCI id)."""
    from app.devices import nvml, pci, rocm

    devices = _last_devices or list_devices()
    out: dict[str, tuple[int, int]] = {}
    if any(d.backend == "cuda" for d in devices):
        for name, g in pci.match(devices, [g for g in nvml.list_gpus() if not g.error], "cuda").items():
            out[name] = (g.free, g.total)
    if any(d.backend == "rocm" for d in devices):
        for name, r in pci.match(devices, rocm.list_gpus(), "rocm").items():
            out[name] = (r.vram_free, r.vram_total)
    return out


def cpu_features() -> frozenset[str]:
    """The SIMD features the CPU backend was built for and runs with (ggml_cpu_has_*)."""
    if probe_out_of_process():
        if not _features_cache:
            _features_cache[:] = [_probe_child()[1]]
        return _features_cache[0]
    _, cpu = libraries()
    if cpu is None:
        return frozenset()
    found = set()
    for feature in _FEATURES:
        fn = getattr(cpu, f"ggml_cpu_has_{feature}", None)
        if fn is not None and fn():
            found.add("i8mm" if feature == "matmul_int8" else feature)
    return frozenset(found)


def _main() -> None:
    """The probe process: print llama.cpp's devices and CPU features as one JSON line."""
    import dataclasses
    import json

    print(json.dumps({"devices": [dataclasses.asdict(d) for d in list_devices()], "features": sorted(cpu_features())}))


if __name__ == "__main__":
    _main()

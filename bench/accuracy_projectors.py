"""Vision projectors: the planner against libmtmd's own buffers, projector type by type.

    python bench/accuracy_projectors.py

Writes tiny projectors of each type the planner builds exactly
(tests/support/tiny_projectors.py), loads each with libmtmd (mtmd_init_from_file,
CPU) in a child process with flash attention on and off, and reads the exact bytes
of clip's weight buffer and of the compute buffer its warmup reserved; then encodes
the largest image the projector accepts and reads the compute buffer again. Prints a
Markdown table (planned / allocated, error) and exits non-zero when a row is outside
the tolerance (weights 0 bytes; compute 2 % or 4 MiB). `bench/accuracy.py` appends
the same section to docs/accuracy.md.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.compare_projectors import ProjectorRow, compare_largest_images, compare_projector  # noqa: E402
from tests.support.tiny import ZOO, write_tiny_model  # noqa: E402
from tests.support.tiny_projectors import LARGEST, OTHER_SHAPES, PROJECTORS, write_tiny_projector  # noqa: E402

MiB = 1024 * 1024


def _within(planned: int, actual: int, relative: float) -> bool:
    return abs(planned - actual) <= max(relative * actual, 4 * MiB if relative else 0)


def _cell(planned: int, actual: int, relative: float) -> str:
    mark = "" if _within(planned, actual, relative) else " **OFF**"
    return f"{planned:,} / {actual:,} ({planned - actual:+,} B){mark}"


def _row(name: str, what: str, row: ProjectorRow) -> str:
    nx, ny = row.image
    fa = "FA" if row.flash_attn else "no FA"
    weights = _cell(row.weights.planned, row.weights.actual, 0.0)
    compute = _cell(row.compute.planned, row.compute.actual, 0.02)
    return f"| `{name}` ({row.projector_type}) | {what} {nx}x{ny}, {fa} | {weights} | {compute} |"


def projector_section(tmp: Path) -> tuple[list[str], int, int]:
    """The Markdown section, its number of rows, and the buffers outside the tolerance."""
    text_model = write_tiny_model(tmp / "text-llama-f16.gguf", ZOO["llama-f16"])
    out = [
        "## Vision projectors (libmtmd)",
        "",
        "Each row loads a tiny projector with libmtmd (`mtmd_init_from_file`, CPU) and reads clip's weight buffer "
        "and its compute buffer (a shim keeps the buffers `ggml_backend_alloc_ctx_tensors_from_buft` returns and "
        "the scheduler clip creates). *warmup*: the buffer after loading, reserved for clip's warmup image; "
        "*largest*: after also encoding the largest image the projector accepts (as many tokens as the model's "
        "limit or the `--image-max-tokens` shown), which the plan's projector compute is for.",
        "",
        "| projector | image | weights planned / allocated (error) | compute planned / allocated (error) |",
        "|---|---|---|---|",
    ]
    n_rows = off = 0
    specs = {**PROJECTORS, **OTHER_SHAPES}
    for name, spec in specs.items():
        path = write_tiny_projector(tmp / f"mmproj-{name}.gguf", spec)
        for row in compare_projector(path, [{"flash_attn": True}, {"flash_attn": False}]):
            out.append(_row(name, "warmup", row))
            n_rows += 1
            off += not _within(row.weights.planned, row.weights.actual, 0.0)
            off += not _within(row.compute.planned, row.compute.actual, 0.02)
        print(f"projector {name:<20} warmup  ok", flush=True)
    for name, (spec, max_tokens) in LARGEST.items():
        path = write_tiny_projector(tmp / f"mmproj-largest-{name}.gguf", spec)
        limit = f"--image-max-tokens {max_tokens}, " if max_tokens else ""
        for row in compare_largest_images(path, text_model, max_tokens):
            out.append(_row(name, f"largest ({limit}encoded)", row))
            n_rows += 1
            off += not _within(row.compute.planned, row.compute.actual, 0.02)
        print(f"projector {name:<20} largest ok", flush=True)
    out.append("")
    return out, n_rows, off


def main() -> int:
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="vramchat-projectors-") as tmp:
        lines, n_rows, off = projector_section(Path(tmp))
    print("\n".join(lines))
    print(f"{n_rows} rows, {off} buffers outside the tolerance, {time.time() - started:.0f} s")
    return 1 if off else 0


if __name__ == "__main__":
    sys.exit(main())

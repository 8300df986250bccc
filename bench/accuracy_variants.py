"""The variants section of docs/accuracy.md: each family's tiny-model variants, the axes each covers.

A family's single tiny model pins one shape; its real releases differ along axes that shape does not
vary (window sizes and patterns, tied output, MQA / GQA / MHA, head sizes, layer counts that are not a
multiple of a pattern, optional tensors, MTP layers, expert counts). Every zoo spec that names the axes
it `covers` is a variant; each is compared with llama.cpp on `variant_grid` (two contexts, flash
attention on and off, f16 and q8_0 caches, two sequences unified and not, a micro-batch of 128, and a
quantized V without flash attention, which both refuse). `bench/accuracy.py` calls this.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from planner.archs import FAMILIES as PLANNER_FAMILIES
from tests.support.compare import ConfigRow, compare_cpu, variant_grid
from tests.support.tiny import ZOO, TinySpec, write_tiny_model


def variants() -> dict[str, dict[str, TinySpec]]:
    """The zoo's variants by planner family (planner/archs/<family>.py), in the zoo's order."""
    out: dict[str, dict[str, TinySpec]] = {}
    for name, spec in ZOO.items():
        if spec.covers:
            out.setdefault(PLANNER_FAMILIES[spec.arch], {})[name] = spec
    return out


def _bad(rows: list[ConfigRow]) -> int:
    """Buffers outside the tolerance, and refusals only one side made."""
    n = 0
    for row in rows:
        if bool(row.refused_by_llama) != bool(row.refused_by_planner):
            n += 1
        n += sum(1 for b in row.buffers if not b.within_tolerance)
    return n


def _largest_compute_error(rows: list[ConfigRow]) -> str:
    errors = [b for r in rows for b in r.buffers if b.kind == "compute"]
    worst = max(errors, key=lambda b: abs(b.error), default=None)
    if worst is None or worst.error == 0:
        return "0 B"
    return f"{worst.error:+,} B ({worst.error_pct:+.2f} %)"


def variants_section(
    tmp: Path, table: Callable[[list[ConfigRow]], list[str]], progress: Callable[[str], None] = print
) -> tuple[list[str], int, int, int, int, bool]:
    """Markdown lines; the number of variants, configurations, buffers compared and buffers off; and
    whether every buffer was equal to the byte."""
    by_family = variants()
    n_variants = sum(len(v) for v in by_family.values())
    lines = [
        "## Variants of each family",
        "",
        f"{n_variants} tiny models vary each family along the axes its real releases use, read from llama.cpp's "
        "converter and loader (which keys and tensors are optional): window sizes and patterns (periods, "
        "explicit per-layer arrays, a last layer that breaks the pattern), tied and untied output, MQA / GQA / "
        "MHA, head sizes other than n_embd / n_head, layer counts that are not a multiple of the pattern, "
        "optional tensors present or absent (biases, Q/K norms, RoPE factors, fused projections), MTP layers, "
        "expert counts, shared experts and per-layer arrays. Each is compared on the variant grid: contexts "
        "512 and 4,096, flash attention off and on, f16 and q8_0 caches (and swa_full on windowed models), two "
        "sequences in one unified cache and in two streams, a micro-batch of 128, and a quantized V without "
        "flash attention, which llama.cpp and the planner both refuse. Weights, KV and recurrent state must "
        "be equal to the byte, compute within the tolerance; a variant with a buffer off gets its full table "
        "below its family's. (No dry run here: the family tables above check it.)",
        "",
    ]
    n_rows = n_buffers = n_off = 0
    exact = True
    for family, specs in by_family.items():
        axes = list(dict.fromkeys(axis for spec in specs.values() for axis in spec.covers))  # in the zoo's order
        archs = sorted({spec.arch for spec in specs.values()})
        lines += [f"### Family `{family}` ({', '.join(f'`{a}`' for a in archs)})", ""]
        lines += ["Axes covered: " + "; ".join(axes) + ".", ""]
        lines += [
            "| variant | architecture | axes | configurations | buffers | largest compute error | status |",
            "|---|---|---|---|---|---|---|",
        ]
        failed: list[tuple[str, list[ConfigRow]]] = []
        for name, spec in specs.items():
            rows = compare_cpu(write_tiny_model(tmp / f"variant-{name}.gguf", spec), variant_grid(bool(spec.n_swa)))
            bad = _bad(rows)
            exact = exact and all(b.error == 0 for r in rows for b in r.buffers)
            buffers = sum(len(r.buffers) for r in rows)
            n_rows, n_buffers, n_off = n_rows + len(rows), n_buffers + buffers, n_off + bad
            status = "all within tolerance" if not bad else f"**{bad} off**"
            lines.append(
                f"| `{name}` | `{spec.arch}` | {'; '.join(spec.covers)} | {len(rows)} | {buffers} | "
                f"{_largest_compute_error(rows)} | {status} |"
            )
            if bad:
                failed.append((name, rows))
            progress(f"{'variants: ' + family:<36} {name:<28} {len(rows):3d} rows  {status}")
        lines.append("")
        for name, rows in failed:
            lines += [f"#### `{name}`: the buffers off", "", *table(rows), ""]
    return lines, n_variants, n_rows, n_buffers, n_off, exact

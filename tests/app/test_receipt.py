"""A plan receipt's peaks, kept across replies, and its Markdown."""

from __future__ import annotations

from app.store.receipt import merge_peaks, peaks, to_markdown
from app.telemetry import Sample
from planner.hardware import GiB, MiB


def _sample(used: int, rss: int, cells: int, tps: float) -> Sample:
    return Sample(
        0.0,
        {"CUDA0": (used, 8 * GiB), "CPU": (4 * GiB, 32 * GiB)},
        rss,
        {"CUDA0": 3 * MiB},
        27 * MiB,
        cells * 1024,
        cells,
        tps,
        tps > 0,
    )


def test_peaks_are_the_largest_readings_and_carry_over_replies() -> None:
    first = peaks([_sample(1 * GiB, 300 * MiB, 100, 0.0), _sample(2 * GiB, 310 * MiB, 140, 41.5)])
    assert first["devices"]["CUDA0"] == {"used": 2 * GiB, "total": 8 * GiB}
    assert first["rss"] == 310 * MiB and first["context_tokens"] == 140 and first["tokens_per_second"] == 41.5
    # ten minutes later the telemetry no longer holds the first reply: its peaks are kept all the same
    later = peaks([_sample(int(1.5 * GiB), 320 * MiB, 90, 38.0)])
    merged = merge_peaks(first, later)
    assert merged["devices"]["CUDA0"]["used"] == 2 * GiB and merged["rss"] == 320 * MiB
    assert merged["context_tokens"] == 140 and merged["tokens_per_second"] == 41.5
    assert peaks([])["rss"] == 0


def test_a_receipt_reads_as_markdown() -> None:
    body = {
        "model": "Gemma 3 270m",
        "vramchat": "0.1.0",
        "context": {"committed": 8192, "maximum": 32768},
        "plan": {
            "verdict": "cpu_only",
            "llama_cpp_build": "llama-cpp-python 0.3.36",
            "config": {"n_ctx": 32768, "type_k": "f16", "type_v": "f16", "n_gpu_layers": 0, "flash_attn": True},
            "devices": [],
            "host": {
                "planned": 800 * MiB,
                "weights": 0,
                "weights_mapped": 235 * MiB,
                "kv": 12 * MiB,
                "compute": 515 * MiB,
                "free": 20 * GiB,
                "total": 23 * GiB,
            },
        },
        "dry_run": {
            "ok": True,
            "seconds": 0.39,
            "verified": True,
            "n_ctx": 32768,
            "message": "",
            "buffers": [{"kind": "kv", "devices": ["CPU"], "planned": 96 * MiB, "dry_run": 96 * MiB}],
        },
        "peaks": {
            "devices": {"CPU": {"used": 2 * GiB, "total": 23 * GiB}},
            "rss": 360 * MiB,
            "kv_in_use": MiB,
            "kv_committed": 27 * MiB,
            "compute": 514 * MiB,
            "context_tokens": 900,
            "tokens_per_second": 16.3,
        },
        "load_seconds": 0.5,
    }
    text = to_markdown(body)
    assert "**Gemma 3 270m** · cpu_only · context 8,192 of 32,768 tokens" in text
    # the model's planned memory beside other programs' at the load: the peak in use is the whole machine's
    assert "| planned | weights | KV | compute | other programs at load | peak in use, all programs |" in text
    assert "| CPU | 800.0 MiB | 235.0 MiB | 12.0 MiB | 515.0 MiB | 3.00 GiB | 2.00 GiB of 23.00 GiB |" in text
    assert "Dry run of the 32,768-token plan (0.39 s): every figure as planned." in text
    assert "- kv on CPU: planned 96.0 MiB, dry run 96.0 MiB" in text and "(differs)" not in text
    assert "900 tokens in the context" in text and "16.3 tokens/s at most" in text

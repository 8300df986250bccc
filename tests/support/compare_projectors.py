"""The planner's projector buffers beside the ones libmtmd allocates (CPU loads).

from tests.support.compare_projectors import compare_projector
for row in compare_projector("mmproj.gguf", [{"flash_attn": True}, {"flash_attn": False}]):
    print(row.config, row.weights, row.compute)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from planner.backends import CPU
from planner.projector import Projector, read_projector
from planner.projectors.compute import compute_buffers, largest_images, loaded_tensors
from tests.support.oracle.oracle import measure_projector


@dataclass(frozen=True)
class Pair:
    planned: int
    actual: int

    @property
    def error(self) -> int:
        return self.planned - self.actual


@dataclass(frozen=True)
class ProjectorRow:
    config: dict[str, Any]
    projector_type: str
    image: tuple[int, int]  # the image clip's warmup reserved for, or the one it encoded
    weights: Pair
    compute: Pair  # after the warmup, or after the warmup and the image (the planner's peak)
    flash_attn: bool  # what clip reported after its warmup


def planned_weights(p: Projector) -> int:
    return sum(CPU.padded(CPU.alloc_size(t.type, t.n_bytes, t.shape[0] if t.shape else 1)) for t in loaded_tensors(p))


def compare_projector(path: str | os.PathLike[str], configs: list[dict[str, Any]]) -> list[ProjectorRow]:
    """One row per configuration ({"flash_attn": bool}); raises when libmtmd refuses one."""
    from planner.projectors.compute import warmup_image

    p = read_projector(path)
    rows = []
    for measured in measure_projector(path, configs):
        if not measured["ok"]:
            raise RuntimeError(f"libmtmd refused {path} with {measured['config']}: {measured.get('log')}")
        fa = bool(measured["config"].get("flash_attn"))
        planned = compute_buffers(p, fa)["CPU"]
        rows.append(
            ProjectorRow(
                measured["config"],
                p.projector_type,
                warmup_image(p),
                Pair(planned_weights(p), measured["weights"]),
                Pair(planned, measured["compute"][0]),
                measured["flash_attn"],
            )
        )
    return rows


def compare_largest_images(
    path: str | os.PathLike[str],
    text_model: str | os.PathLike[str],
    image_max_tokens: int | None = None,
    flash_attn: tuple[bool, ...] = (True, False),
) -> list[ProjectorRow]:
    """The compute buffer once libmtmd has encoded one of the planner's largest images (after its warmup),
    beside the planner's (the larger of both graphs'; the largest of these rows is `peak_compute`);
    `image_max_tokens` as llama-server's --image-max-tokens."""
    p = read_projector(path)
    configs = [
        {"flash_attn": fa, "image_max_tokens": image_max_tokens or -1, "encode": list(image)}
        for image in largest_images(p, image_max_tokens)
        for fa in flash_attn
    ]
    rows = []
    for measured in measure_projector(path, configs, text_model=text_model):
        encoded = measured.get("encoded") or {}
        if not measured["ok"] or encoded.get("encode") != 0:
            raise RuntimeError(f"libmtmd could not encode with {measured['config']}: {measured.get('log')}")
        fa = bool(measured["config"]["flash_attn"])
        nx, ny = measured["config"]["encode"]
        planned = max(compute_buffers(p, fa)["CPU"], compute_buffers(p, fa, (nx, ny))["CPU"])
        rows.append(
            ProjectorRow(
                measured["config"],
                p.projector_type,
                (nx, ny),
                Pair(planned_weights(p), measured["weights"]),
                Pair(planned, measured["compute_after_encode"][0]),
                measured["flash_attn"],
            )
        )
    return rows

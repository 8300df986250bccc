"""ggml tensor types as the pinned llama.cpp build defines them.

Block size (elements per block) and type size (bytes per block) come from
ggml's `type_traits` table in llama-cpp-python 0.3.36's vendored ggml.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GGMLType:
    """A ggml tensor type: its blocks and their bytes (ggml_type_traits)."""

    id: int
    name: str
    block_size: int
    type_size: int

    def row_bytes(self, n_elements: int) -> int:
        """Bytes taken by `n_elements` consecutive values (a multiple of the block size)."""
        return n_elements // self.block_size * self.type_size

    @property
    def is_quantized(self) -> bool:
        return self.block_size > 1


_TABLE: tuple[tuple[int, str, int, int], ...] = (
    (0, "f32", 1, 4),
    (1, "f16", 1, 2),
    (2, "q4_0", 32, 18),
    (3, "q4_1", 32, 20),
    (6, "q5_0", 32, 22),
    (7, "q5_1", 32, 24),
    (8, "q8_0", 32, 34),
    (9, "q8_1", 32, 36),
    (10, "q2_K", 256, 84),
    (11, "q3_K", 256, 110),
    (12, "q4_K", 256, 144),
    (13, "q5_K", 256, 176),
    (14, "q6_K", 256, 210),
    (15, "q8_K", 256, 292),
    (16, "iq2_xxs", 256, 66),
    (17, "iq2_xs", 256, 74),
    (18, "iq3_xxs", 256, 98),
    (19, "iq1_s", 256, 50),
    (20, "iq4_nl", 32, 18),
    (21, "iq3_s", 256, 110),
    (22, "iq2_s", 256, 82),
    (23, "iq4_xs", 256, 136),
    (24, "i8", 1, 1),
    (25, "i16", 1, 2),
    (26, "i32", 1, 4),
    (27, "i64", 1, 8),
    (28, "f64", 1, 8),
    (29, "iq1_m", 256, 56),
    (30, "bf16", 1, 2),
    (34, "tq1_0", 256, 54),
    (35, "tq2_0", 256, 66),
    (39, "mxfp4", 32, 17),
    (40, "nvfp4", 64, 36),
    (41, "q1_0", 128, 18),
    (42, "q2_0", 64, 18),
)

TYPES_BY_ID: dict[int, GGMLType] = {row[0]: GGMLType(*row) for row in _TABLE}
TYPES_BY_NAME: dict[str, GGMLType] = {t.name.lower(): t for t in TYPES_BY_ID.values()}

F32 = TYPES_BY_ID[0]
F16 = TYPES_BY_ID[1]
I32 = TYPES_BY_ID[26]
I64 = TYPES_BY_ID[27]

# Types llama.cpp accepts for the K and V caches (common/arg.cpp's kv_cache_types).
KV_CACHE_TYPES: tuple[str, ...] = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


def ggml_type(name_or_id: str | int) -> GGMLType:
    """Look a type up by its ggml name (case-insensitive) or numeric id."""
    if isinstance(name_or_id, int):
        try:
            return TYPES_BY_ID[name_or_id]
        except KeyError:
            raise ValueError(f"unknown ggml type id {name_or_id}") from None
    try:
        return TYPES_BY_NAME[name_or_id.lower()]
    except KeyError:
        raise ValueError(f"unknown ggml type {name_or_id!r}") from None


def tensor_bytes(type_: GGMLType, shape: tuple[int, ...]) -> int:
    """ggml_nbytes for a contiguous tensor of this type and shape (ne order)."""
    if not shape:
        return type_.type_size
    n_rows = 1
    for dim in shape[1:]:
        n_rows *= dim
    if any(dim == 0 for dim in shape):
        return 0
    return type_.row_bytes(shape[0]) * n_rows

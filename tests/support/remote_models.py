"""Real GGUF files for the remote-model tests and bench: a repo of quants, and a split model.

- `write_quant(demo, out, quant)`: the demo model's header (every metadata key, the 262,144-token
  vocabulary) with each weight matrix in the quant's type (llama.cpp's fallback where a row does not
  fit its block: Q5_0 for Q4_K, Q8_0 for Q6_K ...), `general.file_type` set to match, and the data
  left as zeros in a sparse file: a real header with consistent sizes, no disk space.
- `split_model(demo, folder, n)`: the demo cut into n shards as llama.cpp's gguf-split cuts it
  (split.no / split.count / split.tensors.count; the metadata in the first), with its real data.
- `quant_repo(demo, folder)`: a repo as the big uploaders lay them out: 14 quants, one split quant and
  a vision projector (mmproj-F16.gguf).

The files are written by byte surgery on the demo's own header (planner.gguf finds the tensors), so a
quant takes milliseconds.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from planner.ggml_types import TYPES_BY_ID
from planner.gguf import read_gguf_file

# llama.cpp's LLAMA_FTYPE_* for general.file_type
FILE_TYPES = {
    "F32": 0,
    "F16": 1,
    "Q4_0": 2,
    "Q8_0": 7,
    "Q5_0": 8,
    "Q2_K": 10,
    "Q3_K_M": 12,
    "Q3_K_L": 13,
    "Q4_K_S": 14,
    "Q4_K_M": 15,
    "Q5_K_S": 16,
    "Q5_K_M": 17,
    "Q6_K": 18,
    "IQ4_NL": 25,
    "IQ4_XS": 30,
    "BF16": 32,
}
# quant -> (base type, type of ffn_down / attn_v for the _M and _L mixes)
_RECIPES = {
    "F16": ("f16", None),
    "BF16": ("bf16", None),
    "Q8_0": ("q8_0", None),
    "Q6_K": ("q6_K", None),
    "Q5_K_M": ("q5_K", "q6_K"),
    "Q5_K_S": ("q5_K", None),
    "Q5_0": ("q5_0", None),
    "Q4_K_M": ("q4_K", "q6_K"),
    "Q4_K_S": ("q4_K", None),
    "Q4_0": ("q4_0", None),
    "IQ4_XS": ("iq4_xs", None),
    "IQ4_NL": ("iq4_nl", None),
    "Q3_K_L": ("q3_K", "q5_K"),
    "Q3_K_M": ("q3_K", "q4_K"),
    "Q2_K": ("q2_K", "q3_K"),
}
# where a row's length is not a multiple of the type's block (llama.cpp's quantize falls back)
_FALLBACK = {
    "q2_K": "iq4_nl",
    "q3_K": "iq4_nl",
    "q4_K": "q5_0",
    "q5_K": "q5_1",
    "q6_K": "q8_0",
    "iq4_xs": "iq4_nl",
}
QUANTS = tuple(_RECIPES)
_TYPES = {t.name: t for t in TYPES_BY_ID.values()}
_KV_STRING, _KV_U16, _KV_I32 = 8, 2, 5


@dataclass
class _Layout:
    kv: bytes  # the key/value section as it is in the file
    n_kv: int
    tensors: list[tuple[str, tuple[int, ...], int, int, int]]  # name, shape, type id, absolute offset, bytes
    alignment: int
    version: int


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _tensor_info(name: str, shape: tuple[int, ...], type_id: int, offset: int) -> bytes:
    return (
        _string(name)
        + struct.pack("<I", len(shape))
        + b"".join(struct.pack("<q", d) for d in shape)
        + struct.pack("<IQ", type_id, offset)
    )


def _layout(path: Path) -> _Layout:
    header = read_gguf_file(path)
    with path.open("rb") as handle:
        head = handle.read(header.data_offset)
    first = header.tensors[0]
    start = head.find(_tensor_info(first.name, first.shape, first.type.id, 0))
    assert start > 0, "the tensor table was not found"
    n_kv = struct.unpack_from("<Q", head, 16)[0]
    tensors = [(t.name, t.shape, t.type.id, t.offset, t.n_bytes) for t in header.tensors]
    return _Layout(head[24:start], n_kv, tensors, header.alignment, header.version)


def _type_for(name: str, shape: tuple[int, ...], quant: str, current: int) -> int:
    if len(shape) < 2 or not name.endswith(".weight"):
        return current  # norms and biases stay as they are (F32)
    base, mixed = _RECIPES[quant]
    if name == "token_embd.weight" and base not in ("f16", "bf16"):
        base = "q8_0"  # as the demo's own Q4_K_M keeps it (its rows of 640 take no K-quant)
    wanted = mixed if mixed and (".ffn_down." in name or ".attn_v." in name) else base
    ggml_type = _TYPES[wanted]
    while shape[0] % ggml_type.block_size:
        ggml_type = _TYPES[_FALLBACK.get(ggml_type.name, "q8_0")]
    return ggml_type.id


def _set_file_type(kv: bytes, file_type: int) -> bytes:
    key = _string("general.file_type") + struct.pack("<I", 4)
    at = kv.find(key)
    assert at >= 0, "general.file_type not found"
    at += len(key)
    return kv[:at] + struct.pack("<I", file_type) + kv[at + 4 :]


def _write(
    out: Path,
    layout: _Layout,
    kv: bytes,
    n_kv: int,
    tensors: list[tuple[str, tuple[int, ...], int]],
    data_from: Path | None = None,
    sources: list[tuple[int, int]] | None = None,
) -> Path:
    """A GGUF file: header, tensor table, then each tensor's data (copied from `data_from` at `sources`
    (offset, bytes), or left as zeros in a sparse file)."""
    align = layout.alignment
    infos, offsets, offset = [], [], 0
    for name, shape, type_id in tensors:
        ggml_type = TYPES_BY_ID[type_id]
        n_bytes = _bytes(ggml_type, shape)
        infos.append(_tensor_info(name, shape, type_id, offset))
        offsets.append((offset, n_bytes))
        offset += n_bytes + (-n_bytes % align)
    head = b"GGUF" + struct.pack("<IQQ", layout.version, len(tensors), n_kv) + kv + b"".join(infos)
    head += b"\0" * (-len(head) % align)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as handle:
        handle.write(head)
        if data_from is not None and sources is not None:
            with data_from.open("rb") as source:
                for (rel, _n), (src, n_bytes) in zip(offsets, sources):
                    handle.seek(len(head) + rel)
                    source.seek(src)
                    handle.write(source.read(n_bytes))
        last_offset, last_bytes = offsets[-1] if offsets else (0, 0)
        handle.truncate(len(head) + last_offset + last_bytes)
    return out


def _bytes(ggml_type: object, shape: tuple[int, ...]) -> int:
    from planner.ggml_types import tensor_bytes

    return tensor_bytes(ggml_type, shape)  # type: ignore[arg-type]


def write_quant(demo: Path, out: Path, quant: str) -> Path:
    """The demo's header at `quant` (see the module's docstring), its data zeros in a sparse file."""
    layout = _layout(demo)
    kv = _set_file_type(layout.kv, FILE_TYPES[quant])
    tensors = [(name, shape, _type_for(name, shape, quant, type_id)) for name, shape, type_id, _, _ in layout.tensors]
    return _write(out, layout, kv, layout.n_kv, tensors)


def split_model(demo: Path, folder: Path, n: int = 3, stem: str | None = None, copy_data: bool = True) -> list[Path]:
    """The model cut into `n` shards as gguf-split cuts it, with its data (or zeros, sparse); the shards."""
    layout = _layout(demo)
    stem = stem or demo.name[: -len(".gguf")]
    per = -(-len(layout.tensors) // n)
    paths = []
    total = len(layout.tensors)
    for index in range(n):
        part = layout.tensors[index * per : (index + 1) * per]
        split_kv = (
            _string("split.no")
            + struct.pack("<IH", _KV_U16, index)
            + _string("split.count")
            + struct.pack("<IH", _KV_U16, n)
            + _string("split.tensors.count")
            + struct.pack("<Ii", _KV_I32, total)
        )
        kv = layout.kv + split_kv if index == 0 else split_kv
        n_kv = layout.n_kv + 3 if index == 0 else 3
        out = folder / f"{stem}-{index + 1:05d}-of-{n:05d}.gguf"
        _write(
            out,
            layout,
            kv,
            n_kv,
            [(name, shape, type_id) for name, shape, type_id, _, _ in part],
            data_from=demo if copy_data else None,
            sources=[(offset, n_bytes) for _, _, _, offset, n_bytes in part],
        )
        paths.append(out)
    return paths


def quant_repo(
    demo: Path, folder: Path, name: str = "gemma-3-270m", quants: tuple[str, ...] = QUANTS
) -> dict[str, Path]:
    """A repo's files (path in the repo -> local file): each of `quants` (the demo itself as Q4_K_M), Q8_0
    also split in two under Q8_0/, and a vision projector."""
    from tests.support.tiny_projectors import PROJECTORS, write_tiny_projector

    files: dict[str, Path] = {}
    for quant in quants:
        repo_path = f"{name}-{quant}.gguf"
        if quant == "Q4_K_M":
            files[repo_path] = demo
            continue
        files[repo_path] = write_quant(demo, folder / repo_path, quant)
    if "Q8_0" in quants:
        for shard in split_model(files[f"{name}-Q8_0.gguf"], folder / "Q8_0", 2, f"{name}-Q8_0", copy_data=False):
            files[f"Q8_0/{shard.name}"] = shard
    files["mmproj-F16.gguf"] = write_tiny_projector(folder / "mmproj-F16.gguf", PROJECTORS["gemma3"])
    return files

"""A GGUF file with another file's exact header, and zeroed (or no) tensor data.

The demo model (245 MB) cannot travel to the GPU machine, but its header can: every
metadata key and every tensor's name, shape and type. Written back with zeroed data
it is the same model to the planner and to llama.cpp's allocator, byte for byte.

    python -m tests.support.header_clone dump MODEL.gguf HEADER.json.gz
    python -m tests.support.header_clone write HEADER.json.gz OUT.gguf [--noise]

`write(..., sparse=True)` writes the header alone and extends the file to its size without
data (a sparse file: no disk space): enough for the planner, which reads only the header.
`write(..., noise=True)` (`write ... --noise`) fills the data with random bytes instead, each masked
so that every f16 and f32 in it (a block's scales, a norm's weights) is finite and below 1: a model
that generates noise rather than a flat distribution, where end-of-text is as likely as any token
and a timed reply would stop after a few tokens.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import gguf
import numpy as np

_SKIP = {"general.architecture"}  # GGUFWriter writes it from its arch argument


def _value(field: gguf.ReaderField) -> Any:
    value = field.contents()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="surrogateescape")
    return value


def dump(model: str | Path, out: str | Path) -> None:
    reader = gguf.GGUFReader(str(model))
    fields = []
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in _SKIP:
            continue
        types = [int(t) for t in field.types]
        fields.append([key, types, _value(field)])
    tensors = [[t.name, [int(x) for x in t.shape], int(t.tensor_type)] for t in reader.tensors]
    arch = _value(reader.fields["general.architecture"])
    size = Path(model).stat().st_size
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        json.dump({"architecture": arch, "fields": fields, "tensors": tensors, "file_bytes": size}, fh)


_FINITE_BELOW_ONE = 0x3B  # a float's top byte so masked keeps its exponent below the bias: finite, |x| < 1


def write(header: str | Path, out: str | Path, sparse: bool = False, noise: bool = False) -> Path:
    with gzip.open(header, "rt", encoding="utf-8") as fh:
        spec = json.load(fh)
    writer = gguf.GGUFWriter(str(out), spec["architecture"])
    rng = np.random.default_rng(0)
    for key, types, value in spec["fields"]:
        vtype = gguf.GGUFValueType(types[0])
        sub = gguf.GGUFValueType(types[1]) if len(types) > 1 else None
        if key == "general.alignment":
            writer.data_alignment = int(value)
        writer.add_key_value(key, value, vtype, sub_type=sub)
    for name, ne, type_id in spec["tensors"]:
        qtype = gguf.GGMLQuantizationType(type_id)
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        row_bytes = ne[0] // block * size
        byte_shape = (*reversed(ne[1:]), row_bytes)
        if sparse:
            nbytes = row_bytes * int(np.prod(ne[1:], dtype=np.int64))
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qtype)
        else:
            if noise:
                data = rng.integers(0, 256, byte_shape, dtype=np.uint8) & _FINITE_BELOW_ONE
            else:
                data = np.zeros(byte_shape, dtype=np.uint8)
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    if sparse:
        writer.write_ti_data_to_file()
        writer.close()
        with open(out, "r+b") as fh:
            fh.truncate(int(spec["file_bytes"]))
        return Path(out)
    writer.write_tensors_to_file()
    writer.close()
    return Path(out)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--noise"]
    if len(args) != 3 or args[0] not in ("dump", "write"):
        sys.exit(__doc__)
    if args[0] == "dump":
        dump(args[1], args[2])
    else:
        write(args[1], args[2], noise="--noise" in sys.argv)

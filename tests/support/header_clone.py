"""A GGUF file with another file's exact header, and zeroed (or no) tensor data.

The demo model (245 MB) cannot travel to the GPU machine, but its header can: every
metadata key and every tensor's name, shape and type. Written back with zeroed data
it is the same model to the planner and to llama.cpp's allocator, byte for byte.

    python -m tests.support.header_clone dump MODEL.gguf HEADER.json.gz
    python -m tests.support.header_clone write HEADER.json.gz OUT.gguf

`write(..., sparse=True)` writes the header alone and extends the file to its size without
data (a sparse file: no disk space): enough for the planner, which reads only the header.
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


def write(header: str | Path, out: str | Path, sparse: bool = False) -> Path:
    with gzip.open(header, "rt", encoding="utf-8") as fh:
        spec = json.load(fh)
    writer = gguf.GGUFWriter(str(out), spec["architecture"])
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
    if len(sys.argv) != 4 or sys.argv[1] not in ("dump", "write"):
        sys.exit(__doc__)
    (dump if sys.argv[1] == "dump" else write)(sys.argv[2], sys.argv[3])

"""The header-only reader: what it reads, and how it refuses broken files.

Every test runs twice: on the file, and on the same file served over HTTP and read by range requests
(`tests/support/remote_reader.py`): the remote reader keeps every check of the local one."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from app.errors import VramchatError
from planner.errors import GGUFError
from planner.gguf import MAX_KEPT_ARRAY, GGUFFile, GGUFModel, SkippedArray, read_gguf
from tests.support.remote_reader import READERS
from tests.support.tiny import TinySpec, write_tiny_model


@pytest.fixture(params=sorted(READERS))
def reader(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def read_file(reader: str, path: Path) -> GGUFFile:
    return READERS[reader][0](path)


def read_model(reader: str, path: Path) -> GGUFModel:
    return READERS[reader][1](path)


def test_reads_the_same_tensors_and_metadata_as_the_gguf_library(zoo: dict[str, Path], reader: str) -> None:
    path = zoo["qwen2-q4_0"]
    mine = read_model(reader, path)
    theirs = gguf.GGUFReader(path)
    assert mine.architecture == "qwen2"
    assert set(mine.tensors) == {t.name for t in theirs.tensors}
    for t in theirs.tensors:
        info = mine.tensors[t.name]
        assert info.shape == tuple(int(x) for x in t.shape)
        assert info.type.id == int(t.tensor_type)
        assert info.n_bytes == int(t.n_bytes)
        assert info.offset == int(t.data_offset)
    assert mine.metadata["qwen2.block_count"] == 4
    assert mine.metadata["qwen2.attention.head_count_kv"] == 2
    assert mine.metadata["general.name"] == "tiny-qwen2"


def test_large_arrays_are_skipped_but_their_length_is_kept(gemma_path: Path, reader: str) -> None:
    model = read_model(reader, gemma_path)
    tokens = model.metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, SkippedArray)
    assert len(tokens) == 262144 > MAX_KEPT_ARRAY
    assert model.metadata["gemma3.attention.sliding_window"] == 512
    assert len(model.tensors) == 236


def test_split_models_are_read_across_all_shards(tmp_path: Path, reader: str) -> None:
    spec = TinySpec("llama", n_layer=4)
    whole = write_tiny_model(tmp_path / "whole.gguf", spec)
    # write the same model split into three shards, as gguf-split names them
    writer = gguf.GGUFWriter(str(tmp_path / "split.gguf"), "llama", split_max_tensors=12)
    source = gguf.GGUFReader(whole)
    for field in source.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        value = field.contents()
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(field.name, value, vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(field.name, value, vtype)
    for t in source.tensors:
        writer.add_tensor(
            t.name,
            np.array(t.data),
            raw_shape=None if t.tensor_type in (0, 1) else t.data.shape,
            raw_dtype=None if t.tensor_type in (0, 1) else t.tensor_type,
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    shards = sorted(tmp_path.glob("split-*-of-*.gguf"))
    assert len(shards) >= 2
    model = read_model(reader, shards[0])
    assert len(model.shards) == len(shards)
    assert set(model.tensors) == set(read_gguf(whole).tensors)
    assert model.file_bytes == sum(p.stat().st_size for p in shards)
    shards[-1].unlink()
    with pytest.raises(Exception, match=r"shard .* is missing") as excinfo:
        read_model(reader, shards[0])
    assert isinstance(excinfo.value, (GGUFError, VramchatError))


# -- malformed files -------------------------------------------------------------------------


def _header(version: int = 3, n_tensors: int = 0, n_kv: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def _string(s: str | bytes) -> bytes:
    raw = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str, type_id: int, payload: bytes) -> bytes:
    return _string(key) + struct.pack("<I", type_id) + payload


def _write(tmp_path: Path, data: bytes, name: str = "bad.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"GGU", "truncated"),
        (b"GGML" + b"\0" * 20, "not a GGUF file"),
        (_header(version=1), "version 1"),
        (_header(version=99), "unsupported GGUF version 99"),
        (_header()[:10], "truncated"),
        (_header(n_kv=1 << 60), "metadata count"),
        (_header(n_tensors=1 << 60), "tensor count"),
        (_header(n_kv=1) + struct.pack("<Q", 1 << 40) + b"key", "claims"),
        (_header(n_kv=1) + _kv("k", 77, b"\0" * 8), "unknown value type 77"),
        (_header(n_kv=1) + _kv("k", 9, struct.pack("<IQ", 4, 1 << 40)), "array 'k' of"),
        (_header(n_kv=1) + _kv("k", 9, struct.pack("<IQ", 8, 1 << 40)), "more than the file can hold"),
        (_header(n_kv=1) + _kv("k", 9, struct.pack("<IQ", 9, 1)), "array of arrays"),
        (_header(n_kv=2) + _kv("k", 4, b"\1\0\0\0") + _kv("k", 4, b"\1\0\0\0"), "duplicate metadata key"),
        (_header(n_kv=1) + _kv("general.alignment", 4, struct.pack("<I", 3)), "power of two"),
        (_header(n_kv=1) + _kv("", 4, b"\1\0\0\0"), "empty"),
    ],
)
def test_malformed_headers_give_one_clear_error(tmp_path: Path, data: bytes, message: str, reader: str) -> None:
    # enough trailing bytes that the counts are plausible, so the reader gets to the broken part
    padding = b"" if len(data) <= 24 else b"\0" * 64
    path = _write(tmp_path, data + padding)
    with pytest.raises(GGUFError, match=message) as excinfo:
        read_file(reader, path)
    assert path.name in str(excinfo.value) and "\n" not in str(excinfo.value)


def _tensor_info(name: str, shape: tuple[int, ...], type_id: int, offset: int) -> bytes:
    return (
        _string(name)
        + struct.pack("<I", len(shape))
        + b"".join(struct.pack("<q", d) for d in shape)
        + struct.pack("<IQ", type_id, offset)
    )


def _with_tensors(infos: list[bytes], data_bytes: int) -> bytes:
    head = _header(n_tensors=len(infos)) + b"".join(infos)
    head += b"\0" * (-len(head) % 32)
    return head + b"\0" * data_bytes


@pytest.mark.parametrize(
    "infos, data_bytes, message",
    [
        ([_tensor_info("a", (8,), 99, 0)], 64, "unknown ggml type 99"),
        ([_tensor_info("a", (8,), 4, 0)], 64, "unknown ggml type 4"),
        ([_tensor_info("a", (33,), 8, 0)], 64, "not a multiple of its block size 32"),
        ([_tensor_info("a", (8, -2), 0, 0)], 64, "negative dimension"),
        ([_tensor_info("a", (1, 1, 1, 1, 1), 0, 0)], 64, "5 dimensions"),
        ([_tensor_info("a", (8,), 0, 0), _tensor_info("a", (8,), 0, 32)], 64, "duplicate tensor name"),
        ([_tensor_info("a", (8,), 0, 0), _tensor_info("b", (8,), 0, 0)], 64, "overlapping or misplaced"),
        ([_tensor_info("a", (8,), 0, 64)], 64, "expected 0"),
        ([_tensor_info("a", (1024,), 0, 0)], 64, "past the end of the file"),
        ([_tensor_info("x" * 80, (8,), 0, 0)], 64, "longer than 63 bytes"),
    ],
)
def test_malformed_tensor_tables_give_one_clear_error(
    tmp_path: Path, infos: list[bytes], data_bytes: int, message: str, reader: str
) -> None:
    path = _write(tmp_path, _with_tensors(infos, data_bytes))
    with pytest.raises(GGUFError, match=message):
        read_file(reader, path)


def test_a_truncated_model_file_is_reported_as_truncated(tmp_path: Path, zoo: dict[str, Path], reader: str) -> None:
    data = zoo["llama-f16"].read_bytes()
    for cut in (30, 200, 3000, len(data) // 2, len(data) - 1):
        path = _write(tmp_path, data[:cut], f"cut{cut}.gguf")
        # the message, not the path: a temporary folder named after this test holds "truncated" itself
        with pytest.raises(GGUFError, match=r"truncated|past the end|claims|impossible for a file") as excinfo:
            read_model(reader, path)
        assert re.search(r"truncated|past the end|claims|impossible for a file", excinfo.value.problem)


def test_a_missing_remote_file_is_named(tmp_path: Path) -> None:
    from app.sources import resolve_source
    from tests.support.remote_reader import shared_hub

    with pytest.raises(VramchatError, match="no such file on the server"):
        resolve_source(shared_hub().url + "/files/nope.gguf")


def test_missing_files_and_directories_are_named(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="no such file"):
        read_gguf(tmp_path / "nope.gguf")
    with pytest.raises(GGUFError, match="is a directory"):
        read_gguf(tmp_path)

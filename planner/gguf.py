"""Header-only GGUF reader.

Reads the metadata and the tensor table of a GGUF file through a memory map,
without touching the tensor data. Large arrays (tokens, scores, merges) are
skipped by walking their lengths; only their element type and length are kept.
Every length and count is checked against the bytes left in the file before it
is used, so a hostile header ends in one `GGUFError`, never a hang or a large
allocation.

A file that is not on this machine (an URL, the Hugging Face hub) is read the same way through a
`ByteSource`: the first block, then as much more as the header needs (`read_gguf_header`), never
the tensor data, and never more than `MAX_REMOTE_HEADER` bytes. Every check above applies to it
unchanged: the bounds are the whole file's, the bytes arrive as the reads reach them.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import sys
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol

from planner.errors import GGUFError
from planner.ggml_types import TYPES_BY_ID, GGMLType, tensor_bytes
from planner.units import SPLIT_NAME

_LITTLE_ENDIAN = sys.byteorder == "little"  # GGUF's lengths are little-endian: read natively where they agree
GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
MAX_NAME_LENGTH = 63  # GGML_MAX_NAME - 1
# Arrays longer than this are skipped: only their type and length are kept.
MAX_KEPT_ARRAY = 4096
# Longer string values (and string arrays holding more bytes) are skipped too, so a
# hostile length can never make the reader copy a large part of the file into memory.
MAX_KEPT_STRING = 1024 * 1024
MAX_KEY_LENGTH = 65535

# GGUF value types
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY, _UINT64, _INT64, _FLOAT64 = range(13)

_SCALAR_FORMATS: dict[int, struct.Struct] = {
    _UINT8: struct.Struct("<B"),
    _INT8: struct.Struct("<b"),
    _UINT16: struct.Struct("<H"),
    _INT16: struct.Struct("<h"),
    _UINT32: struct.Struct("<I"),
    _INT32: struct.Struct("<i"),
    _FLOAT32: struct.Struct("<f"),
    _BOOL: struct.Struct("<?"),
    _UINT64: struct.Struct("<Q"),
    _INT64: struct.Struct("<q"),
    _FLOAT64: struct.Struct("<d"),
}
_TYPE_NAMES = {
    _UINT8: "u8",
    _INT8: "i8",
    _UINT16: "u16",
    _INT16: "i16",
    _UINT32: "u32",
    _INT32: "i32",
    _FLOAT32: "f32",
    _BOOL: "bool",
    _STRING: "string",
    _ARRAY: "array",
    _UINT64: "u64",
    _INT64: "i64",
    _FLOAT64: "f64",
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")

_SPLIT_RE = SPLIT_NAME

FIRST_BLOCK = 256 * 1024  # the first read of a remote header; each later read at least doubles what is held
# No real GGUF header comes near this (a 262,144-token vocabulary with its scores takes 6.5 MB): a remote
# header that runs past it is refused rather than read on, whatever the file's size allows.
MAX_REMOTE_HEADER = 64 * 1024 * 1024


class ByteSource(Protocol):
    """A file read by byte ranges: `name` is what errors call it, `size` the whole file's bytes."""

    name: str
    size: int

    def read(self, start: int, end: int) -> bytes:
        """The bytes [start, end) of the file; fewer only where it holds no more (a header kept alone)."""
        ...


@dataclass(frozen=True)
class SkippedArray:
    """A metadata array too long to keep: its element type and length only."""

    element_type: str
    length: int

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True)
class TensorInfo:
    """One entry of a GGUF file's tensor table: name, shape, type and where its data lies."""

    name: str
    shape: tuple[int, ...]  # ggml order: shape[0] is the row length
    type: GGMLType
    offset: int  # absolute offset of the data in its file
    n_bytes: int
    shard: int = 0

    @property
    def n_elements(self) -> int:
        n = 1
        for dim in self.shape:
            n *= dim
        return n


@dataclass
class GGUFFile:
    """One GGUF file's header."""

    path: str
    version: int
    file_size: int
    alignment: int
    data_offset: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]


@dataclass
class GGUFModel:
    """A model's header, possibly spread over split shards."""

    path: str
    shards: list[GGUFFile]
    metadata: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, TensorInfo] = field(default_factory=dict)

    @property
    def file_bytes(self) -> int:
        return sum(shard.file_size for shard in self.shards)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))


class _Cursor:
    """Bounds-checked reads from a buffer; every failure names the file and offset."""

    __slots__ = ("buf", "end", "path", "pos")

    def __init__(self, buf: Any, path: str) -> None:
        self.buf = buf
        self.pos = 0
        self.end = len(buf)
        self.path = path

    def fail(self, problem: str) -> GGUFError:
        return GGUFError(self.path, problem)

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(
                f"truncated file: {what} at byte {self.pos} needs {n} bytes, {max(self.end - self.pos, 0)} left"
            )

    def u32(self, what: str) -> int:
        self.need(4, what)
        value: int = _U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return value

    def u64(self, what: str) -> int:
        self.need(8, what)
        value: int = _U64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return value

    def i64(self, what: str) -> int:
        self.need(8, what)
        value: int = _I64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return value

    def string(self, what: str, limit: int | None = None) -> str | SkippedArray:
        """A length-prefixed string; one longer than `limit` is skipped (its length kept)."""
        length = self.u64(f"length of {what}")
        if length > self.end - self.pos:
            raise self.fail(f"{what} claims {length} bytes but only {self.end - self.pos} are left")
        if limit is not None and length > limit:
            self.pos += length
            return SkippedArray("string bytes", length)
        self.need(length, what)  # within the file (checked above); a growing cursor fetches it
        raw = bytes(self.buf[self.pos : self.pos + length])
        self.pos += length
        return raw.decode("utf-8", errors="replace")

    def scalar(self, type_id: int, what: str) -> Any:
        fmt = _SCALAR_FORMATS[type_id]
        self.need(fmt.size, what)
        (value,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return value

    def skip_strings(self, count: int, what: str) -> None:
        """Walk `count` length-prefixed strings without decoding them.

        A vocabulary holds hundreds of thousands: the fast walk checks nothing per string (a
        length that runs past the buffer makes the next read fail, or the end lands beyond
        it), and only a walk that failed is done again, checked, for the precise message."""
        pos = self.pos
        if _LITTLE_ENDIAN and count >= 64:
            pos = self._walk_aligned(count, self.end)
        else:
            unpack = _U64.unpack_from
            try:
                for _ in range(count):
                    pos += 8 + unpack(self.buf, pos)[0]
            except (struct.error, OverflowError):
                pos = self.end + 1
        if pos <= self.end:
            self.pos = pos
            return
        self._skip_strings_checked(count, what)

    def _walk_aligned(self, count: int, end: int) -> int:
        """The fast walk through eight views of the buffer's first `end` bytes as native (little-endian)
        u64s, one per byte offset modulo 8: a length is then one index, `views[pos % 8][pos // 8]`, a
        third cheaper than unpacking it. Returns where the strings end, or past `end` on a bad length."""
        pos = self.pos
        base = memoryview(self.buf)
        views: list[memoryview] = []
        try:
            for k in range(8):
                views.append(base[k : k + (end - k) // 8 * 8].cast("Q"))
            for _ in range(count >> 3):  # eight at a time: a fifth less loop overhead
                pos += 8 + views[pos & 7][pos >> 3]
                pos += 8 + views[pos & 7][pos >> 3]
                pos += 8 + views[pos & 7][pos >> 3]
                pos += 8 + views[pos & 7][pos >> 3]
                pos += 8 + views[pos & 7][pos >> 3]
                pos += 8 + views[pos & 7][pos >> 3]
                pos += 8 + views[pos & 7][pos >> 3]
                pos += 8 + views[pos & 7][pos >> 3]
            for _ in range(count & 7):
                pos += 8 + views[pos & 7][pos >> 3]
        except (IndexError, ValueError, TypeError):  # a length past the end, or a buffer that cannot be cast
            pos = end + 1
        finally:
            for view in views:
                view.release()
            base.release()
        return pos

    def _skip_strings_checked(self, count: int, what: str, first: int = 0) -> None:
        """The walk with every length checked; `first` is the index of the first string (for messages)."""
        buf, pos, end = self.buf, self.pos, self.end
        unpack = _U64.unpack_from
        for index in range(first, first + count):
            if pos + 8 > end:
                self.pos = pos
                raise self.fail(f"truncated file: {what}[{index}] at byte {pos}")
            (length,) = unpack(buf, pos)
            pos += 8 + length
            if pos > end:
                raise self.fail(f"{what}[{index}] claims {length} bytes, past the end of the file")
        self.pos = pos


class _GrowingCursor(_Cursor):
    """A cursor over a file that is read as the parse reaches it (a remote file's header).

    Bounds are the whole file's (`end` is its size), so every check reads as for a local file;
    `buf` holds the first bytes fetched so far, and grows (at least doubling: a header of H bytes
    costs under 2H and a handful of reads) when a read reaches past it, up to `limit` bytes."""

    __slots__ = ("limit", "source")

    def __init__(self, source: ByteSource, first_block: int, limit: int) -> None:
        super().__init__(b"", source.name)
        self.buf = bytearray()
        self.end = source.size
        self.source = source
        self.limit = limit
        self._grow(min(first_block, self.end, limit))

    def need(self, n: int, what: str) -> None:
        super().need(n, what)
        if self.pos + n > len(self.buf):
            self._grow(self.pos + n)

    def _grow(self, needed: int) -> None:
        held = len(self.buf)
        if needed > self.limit:
            raise self.fail(
                f"the header reaches past {self.limit // (1024 * 1024)} MiB (byte {needed:,} is needed), "
                "more than any real GGUF header: not read further"
            )
        target = min(max(needed, 2 * held), self.end, self.limit)
        if target <= held:
            return
        chunk = self.source.read(held, target)
        if held + len(chunk) < needed or len(chunk) > target - held:
            raise self.fail(f"asked for bytes {held:,}-{target - 1:,}, received {len(chunk):,} bytes")
        self.buf += chunk  # a source may hold less than asked (a cached header), never less than needed

    def skip_strings(self, count: int, what: str) -> None:
        """The fast walk over what is held, batch by batch; where a batch runs past the held bytes,
        a checked walk finds the string that does: past the file's end it is reported as the local
        reader reports it, within the file the bytes are fetched and the walk goes on."""
        index = 0
        unpack = _U64.unpack_from
        while index < count:
            batch = min(count - index, 1 << 14)
            held = len(self.buf)
            pos = self._walk_aligned(batch, held) if _LITTLE_ENDIAN and batch >= 64 else held + 1
            if pos <= held:
                self.pos = pos
                index += batch
                continue
            pos, needed = self.pos, 0
            for _ in range(batch):
                if pos + 8 > held:
                    if pos + 8 > self.end:
                        self.pos = pos
                        raise self.fail(f"truncated file: {what}[{index}] at byte {pos}")
                    needed = pos + 8
                    break
                (length,) = unpack(self.buf, pos)
                following = pos + 8 + length
                if following > self.end:
                    raise self.fail(f"{what}[{index}] claims {length} bytes, past the end of the file")
                if following > held:
                    needed = following
                    break
                pos = following
                index += 1
            self.pos = pos
            if needed:
                self._grow(needed)


def _read_value(cur: _Cursor, type_id: int, key: str) -> Any:
    if type_id == _STRING:
        return cur.string(f"value of {key!r}", MAX_KEPT_STRING)
    if type_id in _SCALAR_FORMATS:
        return cur.scalar(type_id, f"value of {key!r}")
    if type_id != _ARRAY:
        raise cur.fail(f"key {key!r} has unknown value type {type_id}")
    elem_type = cur.u32(f"element type of {key!r}")
    count = cur.u64(f"length of {key!r}")
    if elem_type == _ARRAY:
        raise cur.fail(f"key {key!r} is an array of arrays, which GGUF does not allow")
    if elem_type == _STRING:
        # each string takes at least its 8-byte length
        if count > (cur.end - cur.pos) // 8:
            raise cur.fail(f"array {key!r} claims {count} strings, more than the file can hold")
        start = cur.pos
        if count > MAX_KEPT_ARRAY:
            cur.skip_strings(count, key)
            return SkippedArray("string", count)
        cur.skip_strings(count, key)
        if cur.pos - start > MAX_KEPT_STRING:
            return SkippedArray("string", count)
        cur.pos = start
        return [str(cur.string(f"{key}[{i}]")) for i in range(count)]
    fmt = _SCALAR_FORMATS.get(elem_type)
    if fmt is None:
        raise cur.fail(f"array {key!r} has unknown element type {elem_type}")
    n_bytes = count * fmt.size
    cur.need(n_bytes, f"array {key!r} of {count} x {_TYPE_NAMES[elem_type]}")
    if count > MAX_KEPT_ARRAY:
        cur.pos += n_bytes
        return SkippedArray(_TYPE_NAMES[elem_type], count)
    values = [value for (value,) in fmt.iter_unpack(cur.buf[cur.pos : cur.pos + n_bytes])]
    cur.pos += n_bytes
    return values


def _parse(buf: Any, path: str, file_size: int, shard: int) -> GGUFFile:
    return _parse_cursor(_Cursor(buf, path), file_size, shard)


def _parse_cursor(cur: _Cursor, file_size: int, shard: int) -> GGUFFile:
    path = cur.path
    cur.need(4, "magic")
    magic = bytes(cur.buf[0:4])
    if magic != GGUF_MAGIC:
        raise cur.fail(f"not a GGUF file (magic {magic!r}, expected b'GGUF')")
    cur.pos = 4
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        if version == 1:
            raise cur.fail("GGUF version 1 is no longer supported by llama.cpp")
        raise cur.fail(f"unsupported GGUF version {version} (supported: 2 and 3)")
    n_tensors = cur.i64("tensor count")
    n_kv = cur.i64("metadata count")
    # smallest possible entries: a key/value pair is 8 + 4 + 1 bytes, a tensor info 8 + 4 + 4 + 8
    remaining = cur.end - cur.pos
    if n_kv < 0 or n_kv * 13 > remaining:
        raise cur.fail(f"metadata count {n_kv} is impossible for a file of {file_size} bytes")
    if n_tensors < 0 or n_tensors * 24 > remaining:
        raise cur.fail(f"tensor count {n_tensors} is impossible for a file of {file_size} bytes")

    metadata: dict[str, Any] = {}
    for index in range(n_kv):
        key = cur.string(f"key #{index}", MAX_KEY_LENGTH)
        if isinstance(key, SkippedArray):
            raise cur.fail(f"metadata key #{index} is {key.length} bytes long")
        if not key:
            raise cur.fail(f"metadata key #{index} is empty")
        if key in metadata:
            raise cur.fail(f"duplicate metadata key {key!r}")
        type_id = cur.u32(f"type of {key!r}")
        metadata[key] = _read_value(cur, type_id, key)

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
        raise cur.fail(f"general.alignment {alignment!r} is not a power of two")

    infos: list[tuple[str, tuple[int, ...], GGMLType, int]] = []
    seen: set[str] = set()
    for index in range(n_tensors):
        name = cur.string(f"name of tensor #{index}", MAX_NAME_LENGTH)
        if isinstance(name, SkippedArray) or len(name.encode()) > MAX_NAME_LENGTH:
            raise cur.fail(f"tensor #{index} name is longer than {MAX_NAME_LENGTH} bytes")
        if name in seen:
            raise cur.fail(f"duplicate tensor name {name!r}")
        seen.add(name)
        n_dims = cur.u32(f"dimension count of {name!r}")
        if n_dims > MAX_DIMS:
            raise cur.fail(f"tensor {name!r} has {n_dims} dimensions (at most {MAX_DIMS})")
        shape = tuple(cur.i64(f"dimension of {name!r}") for _ in range(n_dims))
        if any(dim < 0 for dim in shape):
            raise cur.fail(f"tensor {name!r} has a negative dimension {shape}")
        type_id = cur.u32(f"type of {name!r}")
        ggml_t = TYPES_BY_ID.get(type_id)
        if ggml_t is None:
            raise cur.fail(f"tensor {name!r} has unknown ggml type {type_id}")
        if shape and shape[0] % ggml_t.block_size:
            raise cur.fail(
                f"tensor {name!r} of type {ggml_t.name} has rows of {shape[0]} elements, "
                f"not a multiple of its block size {ggml_t.block_size}"
            )
        offset = cur.u64(f"offset of {name!r}")
        infos.append((name, shape, ggml_t, offset))

    data_offset = cur.pos
    if n_tensors:
        data_offset += -data_offset % alignment

    tensors: list[TensorInfo] = []
    expected = 0
    for name, shape, ggml_t, offset in infos:
        n_bytes = tensor_bytes(ggml_t, shape)
        if offset != expected:
            raise cur.fail(
                f"tensor {name!r} data starts at offset {offset}, expected {expected} "
                "(tensor data must follow the previous tensor; overlapping or misplaced)"
            )
        absolute = data_offset + offset
        if absolute + n_bytes > file_size:
            raise cur.fail(
                f"tensor {name!r} data ({n_bytes} bytes at {absolute}) lies past the end of "
                f"the file ({file_size} bytes): the file is truncated"
            )
        tensors.append(TensorInfo(name, shape, ggml_t, absolute, n_bytes, shard))
        expected = offset + n_bytes + (-n_bytes % alignment)

    return GGUFFile(path, version, file_size, alignment, data_offset, metadata, tensors)


def read_gguf_file(path: str | os.PathLike[str], shard: int = 0) -> GGUFFile:
    """Read one GGUF file's header."""
    path = os.fspath(path)
    try:
        with _open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                raise GGUFError(path, "the file is empty")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    return _parse(view, path, size, shard)
                finally:
                    view.release()
    except IsADirectoryError:
        raise GGUFError(path, "is a directory, not a GGUF file") from None
    except FileNotFoundError:
        raise GGUFError(path, "no such file") from None
    except PermissionError:
        raise GGUFError(path, "permission denied") from None
    except OSError as exc:
        raise GGUFError(path, f"cannot read: {exc.strerror or exc}") from None


def _open_regular(path: str) -> BinaryIO:
    """The file, opened without waiting: O_NONBLOCK makes a FIFO's open return at once (a plain open
    waits for a writer forever), and anything but a regular file is refused before a byte is read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(mode):
            raise GGUFError(path, "is not a regular file (a FIFO, socket or device): a model must be a file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def split_shard_paths(path: str) -> list[str]:
    """All shards of a split model given any one of them, or [path] for a single file."""
    match = _SPLIT_RE.match(os.path.basename(path))
    if not match:
        return [path]
    count = int(match["count"])
    folder = os.path.dirname(path)
    return [os.path.join(folder, f"{match['stem']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]


def read_gguf(path: str | os.PathLike[str]) -> GGUFModel:
    """Read a model's header, following split shards (`*-00001-of-0000N.gguf`)."""
    path = os.fspath(path)
    paths = split_shard_paths(path)
    first = read_gguf_file(paths[0], 0)
    _check_split_name(path, first, len(paths))
    shards = [first]
    for index, shard_path in enumerate(paths[1:], start=1):
        if not os.path.exists(shard_path):
            raise GGUFError(
                path, f"split model: shard {index + 1} of {len(paths)} is missing ({os.path.basename(shard_path)})"
            )
        shards.append(read_gguf_file(shard_path, index))
    return model_of_shards(paths[0], shards)


def _check_split_name(path: str, first: GGUFFile, n_named: int) -> None:
    declared = first.metadata.get("split.count")
    if n_named == 1 and isinstance(declared, int) and declared > 1:
        raise GGUFError(
            path,
            f"the header says the model is split into {declared} files, "
            "but the file name does not follow the -0000N-of-0000M.gguf pattern",
        )


def model_of_shards(path: str, shards: list[GGUFFile]) -> GGUFModel:
    """One model from its shards' headers (the first holds the metadata); a tensor in two shards is refused."""
    model = GGUFModel(path=path, shards=shards, metadata=dict(shards[0].metadata))
    for shard in shards:
        for info in shard.tensors:
            if info.name in model.tensors:
                raise GGUFError(shard.path, f"tensor {info.name!r} appears in more than one shard")
            model.tensors[info.name] = info
    return model


def read_gguf_header(
    source: ByteSource, shard: int = 0, first_block: int = FIRST_BLOCK, limit: int = MAX_REMOTE_HEADER
) -> tuple[GGUFFile, bytes]:
    """One file's header read from `source` by byte ranges, with every check of `read_gguf_file`:
    the header, and its bytes (everything before the tensor data: what a sparse copy or a cache holds)."""
    if source.size == 0:
        raise GGUFError(source.name, "the file is empty")
    cur = _GrowingCursor(source, first_block, limit)
    header = _parse_cursor(cur, source.size, shard)
    return header, bytes(cur.buf[: min(header.data_offset, len(cur.buf))])


def read_gguf_model(sources: list[ByteSource], headers: list[tuple[GGUFFile, bytes]] | None = None) -> GGUFModel:
    """A model from its files read by byte ranges, in shard order (one source for a single file), as
    `read_gguf` reads local ones; `headers` gives shards already read (in the same order)."""
    if headers is None:
        headers = [read_gguf_header(source, index) for index, source in enumerate(sources)]
    _check_split_name(sources[0].name, headers[0][0], len(sources))
    return model_of_shards(sources[0].name, [header for header, _ in headers])

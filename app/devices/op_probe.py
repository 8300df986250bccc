"""Asking a device whether it runs an op at given shapes: `ggml_backend_dev_supports_op`, through ctypes.

The planner describes each op of a model's graphs as supports_op reads it (planner.op_support.op_key: the
op, its op parameter, and the type, shape, strides and view offset of the result and of each source by ggml's
source slot). This module builds exactly those tensors in a ggml context that allocates nothing, and asks the
device. The tensors are written field by field into ggml's own `struct ggml_tensor` (ggml.h of the pinned
build): no op constructor runs, so no shape assertion of ggml's can abort the process, and a view's strides
and offset are the graph's own. Before asking, the layout and the enum values are checked against the
library itself (a tensor ggml made, read back; the op, unary and glu names ggml reports): a libggml that
differs answers nothing, and the planner's own rules stand.

Run as `python -m app.devices.op_probe` it reads {"devices": [...], "queries": {device: [key, ...]}} as JSON
on stdin and prints {"answers": {device: [true | false | null, ...]}}: the app runs it so, in a child process,
where a GPU backend is loaded (app/devices/ggml.py says why).
"""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Sequence
from typing import Any

from app.native import GGMLUnavailable, libraries
from planner.ggml_types import TYPES_BY_ID

MAX_DIMS, MAX_SRC, MAX_OP_PARAMS, MAX_NAME = 4, 10, 64, 64
GGML_TYPE_I8 = 24

# enum ggml_op, ggml_unary_op and ggml_glu_op of the pinned ggml (ggml.h), in order; checked against the
# library's own names before any question is asked
OPS = (  # noqa: SIM905
    "NONE DUP ADD ADD_ID ADD1 ACC SUB MUL DIV SQR SQRT LOG SIN COS SUM SUM_ROWS CUMSUM MEAN ARGMAX COUNT_EQUAL "
    "REPEAT REPEAT_BACK CONCAT SILU_BACK NORM RMS_NORM RMS_NORM_BACK GROUP_NORM L2_NORM MUL_MAT MUL_MAT_ID OUT_PROD "
    "SCALE SET CPY CONT RESHAPE VIEW PERMUTE TRANSPOSE GET_ROWS GET_ROWS_BACK SET_ROWS DIAG DIAG_MASK_INF "
    "DIAG_MASK_ZERO SOFT_MAX SOFT_MAX_BACK ROPE ROPE_BACK CLAMP CONV_TRANSPOSE_1D IM2COL IM2COL_BACK IM2COL_3D "
    "COL2IM_1D CONV_2D CONV_3D CONV_2D_DW CONV_TRANSPOSE_2D POOL_1D POOL_2D POOL_2D_BACK UPSCALE PAD PAD_REFLECT_1D "
    "ROLL ARANGE TIMESTEP_EMBEDDING ARGSORT TOP_K LEAKY_RELU TRI FILL FLASH_ATTN_EXT FLASH_ATTN_BACK SSM_CONV "
    "SSM_SCAN WIN_PART WIN_UNPART GET_REL_POS ADD_REL_POS RWKV_WKV6 GATED_LINEAR_ATTN RWKV_WKV7 SOLVE_TRI "
    "GATED_DELTA_NET LIGHTNING_INDEXER DSV4_HC_COMB DSV4_HC_PRE DSV4_HC_POST UNARY MAP_CUSTOM1 MAP_CUSTOM2 "
    "MAP_CUSTOM3 CUSTOM CROSS_ENTROPY_LOSS CROSS_ENTROPY_LOSS_BACK OPT_STEP_ADAMW OPT_STEP_SGD GLU"
).split()
UNARY_OPS = (  # noqa: SIM905
    "ABS SGN NEG STEP TANH ELU RELU SIGMOID GELU GELU_QUICK SILU HARDSWISH HARDSIGMOID EXP EXPM1 SOFTPLUS GELU_ERF "
    "XIELU FLOOR CEIL ROUND TRUNC"
).split()
GLU_OPS = (  # noqa: SIM905
    "REGLU GEGLU SWIGLU SWIGLU_OAI GEGLU_ERF GEGLU_QUICK SWIGLU_CLAMP"
).split()


class _Tensor(ctypes.Structure):
    """struct ggml_tensor (ggml.h)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * MAX_DIMS),
        ("nb", ctypes.c_size_t * MAX_DIMS),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * (MAX_OP_PARAMS // 4)),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * MAX_SRC),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * MAX_NAME),
        ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class ProbeMismatch(RuntimeError):
    """This libggml is not laid out as this module expects: nothing is asked."""


def _declare(ggml: ctypes.CDLL) -> None:
    vp, i64, size, text = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t, ctypes.c_char_p
    for name, restype, argtypes in (
        ("ggml_init", vp, [_InitParams]),
        ("ggml_free", None, [vp]),
        ("ggml_tensor_overhead", size, []),
        ("ggml_new_tensor", vp, [vp, ctypes.c_int, ctypes.c_int, ctypes.POINTER(i64)]),
        ("ggml_new_tensor_4d", vp, [vp, ctypes.c_int, i64, i64, i64, i64]),
        ("ggml_add", vp, [vp, vp, vp]),
        ("ggml_view_1d", vp, [vp, vp, i64, size]),
        ("ggml_set_name", vp, [vp, text]),
        ("ggml_nbytes", size, [vp]),
        ("ggml_op_name", text, [ctypes.c_int]),
        ("ggml_unary_op_name", text, [ctypes.c_int]),
        ("ggml_glu_op_name", text, [ctypes.c_int]),
        ("ggml_op_desc", text, [vp]),
        ("ggml_type_name", text, [ctypes.c_int]),
        ("ggml_blck_size", i64, [ctypes.c_int]),
        ("ggml_type_size", size, [ctypes.c_int]),
        ("ggml_backend_dev_by_name", vp, [text]),
        ("ggml_backend_dev_supports_op", ctypes.c_bool, [vp, vp]),
    ):
        fn = getattr(ggml, name)
        fn.restype, fn.argtypes = restype, argtypes


def _struct(ptr: int) -> _Tensor:
    return ctypes.cast(ptr, ctypes.POINTER(_Tensor)).contents


def _name(raw: bytes | None) -> str:
    return (raw or b"").decode(errors="replace")


def check_layout(ggml: ctypes.CDLL) -> None:
    """Raise ProbeMismatch unless struct ggml_tensor and the op enums are this module's."""
    for i, op in enumerate(OPS):
        if _name(ggml.ggml_op_name(i)) != op:
            raise ProbeMismatch(f"ggml op {i} is {_name(ggml.ggml_op_name(i))!r}, expected {op!r}")
    for names, reader in ((UNARY_OPS, ggml.ggml_unary_op_name), (GLU_OPS, ggml.ggml_glu_op_name)):
        for i, op in enumerate(names):
            if _name(reader(i)).upper() != op:
                raise ProbeMismatch(f"ggml's op {i} is {_name(reader(i))!r}, expected {op!r}")
    ctx = ggml.ggml_init(_InitParams(8 * ggml.ggml_tensor_overhead(), None, True))
    if not ctx:
        raise ProbeMismatch("ggml_init failed")
    try:
        a = ggml.ggml_new_tensor_4d(ctx, 0, 2, 3, 5, 7)
        b = ggml.ggml_new_tensor_4d(ctx, 0, 2, 3, 5, 7)
        ggml.ggml_set_name(a, b"probe")
        t = _struct(a)
        if (t.type, tuple(t.ne), tuple(t.nb), t.name) != (0, (2, 3, 5, 7), (4, 8, 24, 120), b"probe"):
            raise ProbeMismatch("struct ggml_tensor's type, ne, nb or name is not where expected")
        added = _struct(ggml.ggml_add(ctx, a, b))
        if added.op != OPS.index("ADD") or (added.src[0], added.src[1]) != (a, b):
            raise ProbeMismatch("struct ggml_tensor's op or src is not where expected")
        view = _struct(ggml.ggml_view_1d(ctx, a, 1, 8))
        if (view.view_src, view.view_offs) != (a, 8):
            raise ProbeMismatch("struct ggml_tensor's view_src or view_offs is not where expected")
        t.op, t.op_params[0] = OPS.index("UNARY"), UNARY_OPS.index("SILU")
        if _name(ggml.ggml_op_desc(a)) != "SILU":
            raise ProbeMismatch("struct ggml_tensor's op_params is not where expected")
    finally:
        ggml.ggml_free(ctx)


TensorSpec = Sequence[Any]  # [type id, ne, nb, view offset (-1: not a view)]


class _Builder:
    """Tensors of one question, in a context that allocates no data."""

    def __init__(self, ggml: ctypes.CDLL, ctx: int) -> None:
        self.ggml, self.ctx = ggml, ctx

    def tensor(self, spec: TensorSpec) -> int:
        type_id, ne, nb, offs = int(spec[0]), [int(n) for n in spec[1]], [int(n) for n in spec[2]], int(spec[3])
        dims = (ctypes.c_int64 * MAX_DIMS)(*ne)
        ptr = self.ggml.ggml_new_tensor(self.ctx, type_id, MAX_DIMS, dims)
        t = _struct(ptr)
        for i in range(MAX_DIMS):
            t.nb[i] = nb[i]
        if offs >= 0:  # a view: its source spans the view's bytes after the offset
            span = offs + max(int(self.ggml.ggml_nbytes(ptr)), 1)
            base = self.ggml.ggml_new_tensor(self.ctx, GGML_TYPE_I8, 1, (ctypes.c_int64 * 1)(span))
            t.view_src, t.view_offs = base, offs
        return int(ptr)


def _valid(ggml: ctypes.CDLL, spec: TensorSpec, type_names: dict[int, str]) -> bool:
    """A tensor ggml_new_tensor takes: a known type and, for a quantized one, whole blocks in a row."""
    type_id, ne = int(spec[0]), spec[1]
    return type_id in type_names and all(n >= 1 for n in ne) and ne[0] % int(ggml.ggml_blck_size(type_id)) == 0


def ask(
    ggml: ctypes.CDLL, device: str, queries: Sequence[Sequence[Any]], type_names: dict[int, str]
) -> list[bool | None]:
    """The device's answer to each query [op, param, dst, [src or None, ...]]; None where it cannot be asked
    (an op or a type this libggml does not know)."""
    dev = ggml.ggml_backend_dev_by_name(device.encode())
    if not dev:
        return [None] * len(queries)
    answers: list[bool | None] = []
    room = 2 * (MAX_SRC + 1) * ggml.ggml_tensor_overhead()  # each tensor and a view's source
    for op, param, dst, sources in queries:
        specs = [dst, *[s for s in sources if s is not None]]
        if op not in OPS or len(sources) > MAX_SRC or not all(_valid(ggml, s, type_names) for s in specs):
            answers.append(None)
            continue
        ctx = ggml.ggml_init(_InitParams(room, None, True))
        if not ctx:
            answers.append(None)
            continue
        try:
            build = _Builder(ggml, ctx)
            node = build.tensor(dst)
            t = _struct(node)
            t.op = OPS.index(op)
            if param in UNARY_OPS and op == "UNARY":
                t.op_params[0] = UNARY_OPS.index(param)
            elif param in GLU_OPS and op == "GLU":
                t.op_params[0] = GLU_OPS.index(param)
            for slot, spec in enumerate(sources):
                if spec is not None:
                    t.src[slot] = build.tensor(spec)
            answers.append(bool(ggml.ggml_backend_dev_supports_op(dev, node)))
        finally:
            ggml.ggml_free(ctx)
    return answers


def ask_devices(queries: dict[str, list[Any]]) -> dict[str, list[bool | None]]:
    """Each device's answers to its queries, in this process (llama.cpp's backends loaded here)."""
    ggml, _ = libraries()
    try:
        _declare(ggml)
    except AttributeError as exc:
        raise GGMLUnavailable(f"this libggml lacks a function the op probe needs: {exc}") from None
    check_layout(ggml)
    # the types asked about, each where ggml names it as the planner does (the planner's table is the pinned
    # ggml's: an id past this library's types is never read)
    type_ids = {int(spec[0]) for qs in queries.values() for q in qs for spec in [q[2], *q[3]] if spec is not None}
    type_names = {}
    for type_id in sorted(type_ids):
        known = TYPES_BY_ID.get(type_id)
        if known is not None and _name(ggml.ggml_type_name(type_id)) == known.name:
            type_names[type_id] = known.name
    return {device: ask(ggml, device, qs, type_names) for device, qs in queries.items()}


def _main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        answers = ask_devices(request["queries"])
    except (GGMLUnavailable, ProbeMismatch) as exc:
        print(json.dumps({"error": str(exc)}))
        return
    print(json.dumps({"answers": answers}))


if __name__ == "__main__":
    _main()

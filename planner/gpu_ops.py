"""Which ops and weights a GPU backend takes (ggml-cuda's supports_op, for CUDA and ROCm).

An op the GPU does not support runs on the CPU: the scheduler leaves it to the backend that
supports it (ggml-backend.cpp, pass 2 and 3), with copies of its inputs in the host compute
buffer. A weight whose op the GPU does not support is loaded into host memory even on an
offloaded layer (llama-model-loader.cpp, weight_buft_supported). The rules are ggml-cuda's,
for the shapes the planner's graphs produce; other GPU backends are taken to support all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the graph module is needed only where graphs are built
    from planner.ggml_graph import Tensor
    from planner.hparams import StateSpace

FATTN_KQ_STRIDE = 256  # ggml-cuda/fattn-common.cuh
_FATTN_KV_TYPES = frozenset({"f16", "f32", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"})
_SAME_HEAD = frozenset({40, 64, 72, 80, 96, 112, 128, 256})
# K head size -> (V head size, the GQA ratio's required divisor); these need the GQA optimisation
_WIDE_HEADS = {192: (128, 8), 320: (256, 32), 512: (512, 1), 576: (512, 1)}

CUDA_LIKE = frozenset({"cuda", "rocm"})


def _flash_attn_supported(node: Tensor) -> bool:
    """ggml_cuda_get_best_fattn_kernel != NONE (ggml-cuda/fattn.cu), for a mask without ALiBi."""
    q, k, v = node.src[0], node.src[1], node.src[2]
    mask = node.source(3)
    if k.ne[2] == 0 or q.ne[2] % k.ne[2]:
        return False
    gqa_ratio = q.ne[2] // k.ne[2]
    gqa_opt = gqa_ratio >= 2 and mask is not None and k.ne[1] % FATTN_KQ_STRIDE == 0
    for t in (q, k, v, mask):
        if t is not None and not t.type.is_quantized and any(nb % 16 for nb in t.nb[1:]):
            gqa_opt = False
    dk, dv = k.ne[0], v.ne[0]
    if dk in _SAME_HEAD:
        if dv != dk:
            return False
    elif dk in _WIDE_HEADS:
        want_v, divisor = _WIDE_HEADS[dk]
        if dv != want_v or not gqa_opt or gqa_ratio % divisor:
            return False
    else:
        return False
    if k.type.name not in _FATTN_KV_TYPES or v.type.name not in _FATTN_KV_TYPES:
        return False
    return mask is None or mask.ne[2] == 1


def _ssm_scan_supported(node: Tensor) -> bool:
    s, a, b = node.src[0], node.src[3], node.src[4]
    if a.ne[0] == 1:  # Mamba-2: d_state 96, 128 or 256 and a head size divisible by 16
        return s.ne[0] in (96, 128, 256) and s.ne[1] % 16 == 0
    return s.ne[0] == 16 and s.ne[1] == 1 and s.ne[2] % 128 == 0 and b.ne[1] == 1


_INDEXER_K_TYPES = frozenset({"f32", "bf16", "f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0"})


def _lightning_indexer_supported(node: Tensor) -> bool:
    """ggml-cuda's fused DSA indexer (lightning-indexer.cu): heads of 128 values, 32 or 64 heads,
    16-byte strides for unquantized Q and K, and a K type it has kernels for."""
    q, k = node.src[0], node.src[1]
    if q.ne[0] != 128 or q.ne[1] not in (32, 64):
        return False
    for t in (q, k):
        if not t.type.is_quantized and any(nb % 16 for nb in t.nb[1:]):
            return False
    return k.type.name in _INDEXER_K_TYPES


def within_tensor_limit(node: Tensor, max_tensor: int | None) -> bool:
    """No source and no result larger than the device's largest tensor (Device.max_tensor_bytes):
    ggml-vulkan's supports_op refuses such an op first (ggml-vulkan.cpp, ggml_backend_vk_device_supports_op,
    `tensor_size_supported`: maxBufferSize, and maxStorageBufferRange without 64-bit indexing)."""
    if max_tensor is None:
        return True
    return node.nbytes() <= max_tensor and all(s.nbytes() <= max_tensor for s in node.src if s is not None)


# --- ggml-vulkan (ggml-vulkan.cpp, ggml_backend_vk_device_supports_op), for the ops whose support depends on
# shapes or types the planner's graphs produce; a device's own features (subgroup operations, shared memory)
# are taken as present, as on lavapipe and the desktop drivers

_VK_FA_KV_TYPES = frozenset({"f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"})


def _vk_flash_attn_supported(node: Tensor) -> bool:
    q, k, v = node.src[0], node.src[1], node.src[2]
    mask, sinks = node.source(3), node.source(4)
    if k.ne[0] % 8 or v.ne[0] % 8 or q.type.name != "f32" or node.type.name != "f32":
        return False
    if (sinks is not None and sinks.type.name != "f32") or (mask is not None and mask.type.name != "f16"):
        return False
    if k.type.name not in _VK_FA_KV_TYPES or v.type.name not in _VK_FA_KV_TYPES:
        return False
    return (k.type.name == "bf16") == (v.type.name == "bf16")


def _vk_ssm_scan_supported(d_state: int, head_dim: int, mamba2: bool) -> bool:
    """Mamba-2 only, with a state of 128 or 256 and heads a multiple of 16."""
    return mamba2 and d_state in (128, 256) and head_dim % 16 == 0


_VK_MATMUL_TYPES = frozenset(
    {"f32", "f16", "bf16", "q1_0", "q2_0", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K"}
    | {"q6_K", "iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_xs", "iq4_nl", "mxfp4"}
    | {"nvfp4", "tq1_0", "tq2_0"}
)


def _vk_dim01_contiguous(t: Tensor) -> bool:
    """ggml_vk_dim01_contiguous: rows packed, and the 4th dimension's stride follows the 3rd's."""
    return (
        t.nb[0] == t.type.type_size
        and t.nb[1] == t.nb[0] * t.ne[0] // t.type.block_size
        and (t.ne[3] == 1 or t.nb[3] == t.nb[2] * t.ne[2])
    )


def _vk_mul_mat_supported(node: Tensor) -> bool:
    """A quantized matrix read through a strided view (a quantized K cache without flash attention) is not
    multiplied on the device: the scheduler runs it on the CPU and copies the cache there."""
    w, x = node.src[0], node.src[1]
    if w.type.name not in _VK_MATMUL_TYPES:
        return False
    a = node.src[2] if node.op == "MUL_MAT_ID" else w
    if a.ne[3] != x.ne[3]:
        return False
    if not (_vk_dim01_contiguous(w) or w.type.name in ("f32", "f16", "bf16")):
        return False
    if not (_vk_dim01_contiguous(x) or x.type.name in ("f32", "f16")):
        return False
    if w.type.name == "bf16" and x.type.name == "f16":
        return False
    return not (x.type.name == "bf16" and w.type.name != "bf16")


def _vulkan_supports(node: Tensor) -> bool:
    if node.op in ("MUL_MAT", "MUL_MAT_ID"):
        return _vk_mul_mat_supported(node)
    if node.op == "FLASH_ATTN_EXT":
        return _vk_flash_attn_supported(node)
    if node.op == "SSM_SCAN" and len(node.src) >= 5:
        s, a = node.src[0], node.src[3]
        return _vk_ssm_scan_supported(s.ne[0], s.ne[1], a.ne[0] == 1)
    if node.op == "GATED_LINEAR_ATTN":
        return node.src[0].ne[0] == 64  # the shader's block size
    if node.op == "GATED_DELTA_NET":
        return node.src[2].ne[0] in (16, 32, 64, 128)
    return True


def supports_op(backend: str, node: Tensor, max_tensor: int | None = None) -> bool:
    """Whether a GPU backend (cuda, rocm, metal, vulkan) runs `node` on a device whose largest tensor is
    `max_tensor` bytes (None: no limit)."""
    if not within_tensor_limit(node, max_tensor):
        return False
    if backend == "vulkan":
        return _vulkan_supports(node)
    if backend not in CUDA_LIKE:
        return True
    if node.op == "FLASH_ATTN_EXT":
        return _flash_attn_supported(node)
    if node.op == "SSM_SCAN" and len(node.src) >= 5:
        return _ssm_scan_supported(node)
    if node.op == "SSM_CONV":
        return node.src[0].ne[1] % 128 == 0
    if node.op == "LIGHTNING_INDEXER":
        return _lightning_indexer_supported(node)
    return True  # TOP_K too: builds with CUDA 11.7 or newer sort any row length with CUB


# architectures whose ssm_a multiplies (LLM_TENSOR_SSM_A_NOSCAN) rather than feeding SSM_SCAN
_SSM_A_NOSCAN = frozenset(
    {"qwen3next", "qwen35", "qwen35moe", "qwen4exp", "kimi-linear", "kimi-k3", "bailingmoe3", "glm5-next"}
)


# weights read with GET_ROWS (embedding tables), never through a matmul
LOOKUP_TABLES = ("token_embd.weight", "per_layer_token_embd.weight", "position_embd.weight", "token_types.weight")
TEST_BATCH = 512  # llama-model-loader.cpp, weight_buft_supported: the test op's batch


def test_op_bytes(name: str, shape: tuple[int, ...], n_bytes: int, matmul: bool, n_expert_used: int) -> int:
    """The largest tensor of the op llama.cpp builds to test where a weight may live (weight_buft_supported in
    llama-model-loader.cpp): the weight, the batch of 512 it is applied to, and the result."""
    ne = [*shape, 1, 1, 1, 1][:4]
    if matmul and name.endswith("_exps.weight"):  # MUL_MAT_ID: b [ne0, n_used, 512], result [ne1, n_used, 512]
        used = max(n_expert_used, 1)
        return max(n_bytes, 4 * ne[0] * used * TEST_BATCH, 4 * ne[1] * used * TEST_BATCH)
    if matmul:  # MUL_MAT: b F32 [ne0, 512, ne2, ne3], result F32 [ne1, 512, ne2, ne3]
        return max(n_bytes, 4 * ne[0] * TEST_BATCH * ne[2] * ne[3], 4 * ne[1] * TEST_BATCH * ne[2] * ne[3])
    if name in LOOKUP_TABLES:  # GET_ROWS of 512 rows: result F32 [ne0, 512]
        return max(n_bytes, 4 * ne[0] * TEST_BATCH)
    return max(n_bytes, 4 * ne[0] * ne[1] * ne[2] * ne[3])  # ADD / MUL: an F32 tensor of its shape


def weight_supported(
    backend: str,
    architecture: str,
    name: str,
    shape: tuple[int, ...],
    ssm: StateSpace | None,
    *,
    n_bytes: int = 0,
    matmul: bool = False,
    max_tensor: int | None = None,
    n_expert_used: int = 0,
) -> bool:
    """weight_buft_supported for a GPU: whether the op that uses this weight runs there.

    On a device with a largest tensor (Vulkan: maxStorageBufferRange, 128 MiB on lavapipe), a weight whose
    test op touches a larger tensor goes to the next buffer type of its list, the host's: a 7B's output
    matrix, or a 262k-vocabulary tied embedding. Beyond that only the SSM weights have shape-dependent
    support in ggml-cuda: ssm_a (SSM_SCAN, tested with the layer's state sizes) and ssm_conv1d (SSM_CONV,
    channels a multiple of 128)."""
    if max_tensor is not None and test_op_bytes(name, shape, n_bytes, matmul, n_expert_used) > max_tensor:
        return False
    if backend == "vulkan" and name.endswith(".ssm_a") and architecture not in _SSM_A_NOSCAN:
        n_head = shape[1] if len(shape) > 1 else 1
        head_dim = (ssm.d_inner if ssm else 0) // n_head if n_head else 0
        return _vk_ssm_scan_supported(ssm.d_state if ssm else 0, head_dim, shape[0] == 1)
    if backend not in CUDA_LIKE:
        return True
    if name.endswith(".ssm_a") and architecture not in _SSM_A_NOSCAN:
        d_inner = ssm.d_inner if ssm else 0
        n_head = shape[1] if len(shape) > 1 else 1
        if shape[0] == 1:  # Mamba-2
            d_state = ssm.d_state if ssm else 0
            head_dim = d_inner // n_head if n_head else 0
            return d_state in (96, 128, 256) and head_dim % 16 == 0
        n_group = (ssm.n_group if ssm else 0) or 1
        head_dim = d_inner // n_head if n_head else 0
        return shape[0] == 16 and head_dim == 1 and n_head % 128 == 0 and n_group == 1
    if name.endswith((".ssm_conv1d.weight", ".shortconv.conv.weight")):
        return len(shape) > 1 and shape[1] % 128 == 0
    return True


__all__ = ["CUDA_LIKE", "LOOKUP_TABLES", "supports_op", "test_op_bytes", "weight_supported", "within_tensor_limit"]

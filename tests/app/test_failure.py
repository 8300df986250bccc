"""Reading llama.cpp's failure messages: memory or not, and which pool refused."""

from __future__ import annotations

import pytest

from app.engine.failure import classify

GPUS = ["CUDA0", "CUDA1"]


@pytest.mark.parametrize(
    ("lines", "pools"),
    [
        # ggml-cuda.cu, then llama-model.cpp when the weights do not fit
        (
            [
                "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9216.00 MiB on device 1: cudaMalloc failed: "
                "out of memory",
                "alloc_tensor_range: failed to allocate CUDA1 buffer of size 9663676416",
                "llama_model_load: error loading model: unable to allocate CUDA1 buffer",
            ],
            {"CUDA1"},
        ),
        # the compute arena (ggml-alloc.c) at context creation
        (
            [
                "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 1610612736",
                "llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers",
            ],
            {"CUDA0"},
        ),
        # pinned host memory is host RAM
        (["alloc_tensor_range: failed to allocate CUDA_Host buffer of size 536870912"], {"CPU"}),
        # the CPU backend (ggml-backend.cpp) and the KV cache (llama-kv-cache.cpp)
        (
            [
                "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 1073741824",
                "llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache",
            ],
            {"CPU"},
        ),
        # no pool named: the retry shrinks every GPU in use
        (["llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache"], set()),
        (["llama_context: failed to allocate output buffer of size 0.98 MiB"], set()),
    ],
)
def test_memory_failures_name_the_pool(lines: list[str], pools: set[str]) -> None:
    failure = classify("could not create the context: " + lines[-1], lines, GPUS)
    assert failure.memory
    assert failure.devices == pools


def test_metal_names_its_device() -> None:
    line = "ggml_metal_buffer_init: error: failed to allocate buffer, size =  8192.00 MiB"
    assert classify("could not load the model", [line], ["MTL0"]).devices == {"MTL0"}


def test_decode_out_of_memory_by_status() -> None:
    assert classify("llama.cpp could not decode (out of memory)", [], GPUS, status=-2).memory
    assert not classify("llama.cpp could not decode (the computation failed)", [], GPUS, status=-3).memory


@pytest.mark.parametrize(
    "message",
    [
        "could not load the model: llama_model_load: error loading model: unknown model architecture: 'zz'",
        "could not load the model: llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is "
        "not within the file bounds",
        "the prompt is empty",
    ],
)
def test_other_failures_are_not_retried(message: str) -> None:
    assert not classify(message, [message], GPUS).memory


def test_cancelled() -> None:
    failure = classify("loading was cancelled", [], GPUS)
    assert failure.cancelled and not failure.memory


def test_a_refused_host_pool_is_named_as_the_users_ram() -> None:
    """llama.cpp names host pools "CPU", "CPU_Mapped" or "Vulkan_Host": the words say host RAM, the pool beside."""
    from app.engine.failure import refusal

    assert refusal("failed to allocate Vulkan0 buffer of size 370216960") == "Vulkan0 could not allocate 353.1 MiB"
    assert refusal("failed to allocate CPU buffer of size 1073741824") == "host RAM (CPU) could not allocate 1.00 GiB"
    assert refusal("failed to allocate Vulkan_Host buffer of size 1048576").startswith("host RAM (Vulkan_Host) could")
    assert refusal("nothing sized here") == ""

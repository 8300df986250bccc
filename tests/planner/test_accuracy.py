"""The planner against llama.cpp itself: every buffer of every configuration, CPU loads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import has_compiler
from tests.support.compare import ConfigRow, compare_cpu, grid, misses, variant_grid
from tests.support.tiny import ZOO

pytestmark = [pytest.mark.llama, pytest.mark.skipif(not has_compiler(), reason="the oracle needs a C compiler")]


def _quantized_v_without_flash_attention(config: dict[str, Any]) -> bool:
    """The one configuration llama.cpp refuses on every model (llama_init_from_model: V cache quantization
    requires flash_attn)."""
    return config.get("type_v", "f16") != "f16" and not config.get("flash_attn")


def _assert_exact(
    rows: list[ConfigRow], configs: list[dict[str, Any]], refused: Callable[[dict[str, Any]], bool] = lambda c: False
) -> None:
    """One row per configuration asked, each planned as llama.cpp allocated it to the byte; the configurations
    `refused` names refused by both, and any other refused only where both name the same rule of llama.cpp's
    (a head size its K cache type does not divide, different K and V types on a latent-attention model)."""
    assert [row.config for row in rows] == configs
    assert misses(rows, refused, by_rule=True) == []
    assert any(not row.refused for row in rows), "no configuration loaded: nothing was compared"


@pytest.mark.parametrize("name", sorted(n for n, spec in ZOO.items() if not spec.covers))
def test_tiny_models_match_llama_cpp(zoo: dict[str, Path], name: str) -> None:
    configs = grid(swa=bool(ZOO[name].n_swa))
    _assert_exact(compare_cpu(zoo[name], configs), configs)


@pytest.mark.parametrize("name", sorted(n for n, spec in ZOO.items() if spec.covers))
def test_variants_match_llama_cpp(zoo: dict[str, Path], name: str) -> None:
    """Each family's variants (head sizes, windows, tied output, optional tensors, MTP layers, experts
    ...) on the variant grid: two contexts, flash attention on and off, f16 and q8_0 caches, two sequences
    unified and not, a micro-batch of 128, and a quantized V without flash attention (refused by both)."""
    configs = variant_grid(swa=bool(ZOO[name].n_swa))
    rows = compare_cpu(zoo[name], configs)
    _assert_exact(rows, configs, _quantized_v_without_flash_attention)
    assert rows[-1].refused_by_llama and rows[-1].refused_by_planner


# contexts 512 to 8,192, micro-batches of 128 and 512, flash attention on and off (issue 37's points)
_CONTEXT_AND_BATCH_GRID = [
    {"n_ctx": ctx, "n_ubatch": ubatch, "flash_attn": fa}
    for ctx in (512, 4096, 8192)
    for ubatch in (128, 512)
    for fa in (False, True)
]


@pytest.mark.parametrize(
    "name",
    [
        "cohere2-one-global-layer",
        "cohere2-two-global-layers",
        "cohere2-period-key",
        "command-r-large-vocab",
        "phi2-large-vocab",
        "falcon-large-vocab",
    ],
)
def test_layer_norm_families_match_llama_cpp_where_the_logits_make_the_peak(zoo: dict[str, Path], name: str) -> None:
    """Cohere 2 with one or two full-attention layers (and its 1-in-4 period), Command R, Phi-2 and Falcon
    normalise with a layer norm, which ggml's allocator never runs in place (an RMS norm it does): planned as
    RMS norms, the compute buffer was up to 48 % high (4 MiB at 4,096 tokens with flash attention) or 5 %
    low once the logits of a 2,048 to 4,096-token vocabulary made its peak."""
    _assert_exact(compare_cpu(zoo[name], _CONTEXT_AND_BATCH_GRID), _CONTEXT_AND_BATCH_GRID)


@pytest.mark.parametrize("name", ["orion", "starcoder2", "gpt2", "starcoder"])
def test_llama_shapes_with_layer_norms_match_llama_cpp_where_the_logits_make_the_peak(
    tmp_path: Path, name: str
) -> None:
    """The llama-shaped families that normalise with layer norms, with a 4,096-token vocabulary: planned as
    RMS norms their compute was 3 to 15 % off."""
    from tests.support.tiny import write_tiny_model

    path = write_tiny_model(tmp_path / f"{name}.gguf", ZOO[name].with_(n_vocab=4096, name=f"tiny {name} 4k vocab"))
    _assert_exact(compare_cpu(path, _CONTEXT_AND_BATCH_GRID[:8]), _CONTEXT_AND_BATCH_GRID[:8])


def test_gemma3_270m_matches_llama_cpp(gemma_path: Path) -> None:
    configs = grid(swa=True)
    rows = compare_cpu(gemma_path, configs)
    _assert_exact(rows, configs)
    row = next(r for r in rows if r.config["n_ctx"] == 2048 and not r.config["flash_attn"])
    # the logits of a 262,144-token vocabulary dominate the compute buffer
    assert row.buffer("compute").actual >= 262144 * 512 * 4


def test_llama4_chunked_layers_stop_growing_past_their_chunk(zoo: dict[str, Path]) -> None:
    configs = [{"n_ctx": 16384, "flash_attn": fa, "n_ubatch": 512} for fa in (False, True)]
    rows = compare_cpu(zoo["llama4"], configs)
    _assert_exact(rows, configs)
    chunked = rows[0].buffer("kv_swa")
    assert chunked is not None and chunked.actual == 6 * (8192 + 512) * 2 * 64 * 2  # 6 chunked layers, K and V


def test_parallel_sequences_pad_the_context_per_stream(zoo: dict[str, Path]) -> None:
    configs = [{"n_ctx": 4096, "n_seq_max": 3, "flash_attn": fa} for fa in (False, True)]
    configs += [{"n_ctx": 4096, "n_seq_max": 2, "kv_unified": True, "flash_attn": True}]
    rows = compare_cpu(zoo["gemma3"], configs)
    _assert_exact(rows, configs)


def test_quantized_v_without_flash_attention_is_refused_by_both(zoo: dict[str, Path]) -> None:
    rows = compare_cpu(zoo["llama-f16"], [{"n_ctx": 1024, "flash_attn": False, "type_k": "q8_0", "type_v": "q8_0"}])
    assert rows[0].refused_by_llama
    assert rows[0].refused_by_planner and "flash attention" in rows[0].refused_by_planner


def test_an_architecture_without_kv_cache(tmp_path: Path) -> None:
    """A diffusion model (dream): llama.cpp creates no KV cache; weights and output stay exact,
    the compute buffer is a named estimate, and it is not offered for chat."""
    from planner.anatomy import load_anatomy
    from planner.archs import not_for_chat
    from planner.gguf import read_gguf
    from tests.support.tiny import TinySpec, write_tiny_model

    path = write_tiny_model(tmp_path / "dream.gguf", TinySpec("dream"))
    configs = grid(swa=False, n_ctx=(512, 2048))
    rows = compare_cpu(path, configs)
    assert [row.config for row in rows] == configs
    for row in rows:
        assert row.refused_by_llama is None and row.refused_by_planner is None
        for kind in ("weights", "kv", "output"):
            buf = row.buffer(kind)
            assert buf is not None and buf.error == 0, (kind, row.config)
        assert row.buffer("kv").actual == 0  # type: ignore[union-attr]
    anatomy = load_anatomy(read_gguf(path))
    assert not anatomy.exact and any("no KV cache" in n for n in anatomy.notes)
    assert not_for_chat(anatomy.architecture) == "a diffusion language model, not a chat model"
    assert not_for_chat("llama") is None


def test_granite_without_logit_scale_and_jamba_with_odd_inner_size_are_refused(tmp_path: Path) -> None:
    """llama.cpp requires granite's logit_scale (it refuses the model) and asserts jamba's
    d_inner == 2 * n_embd (it aborts): the planner refuses both headers up front."""
    from planner.anatomy import load_anatomy
    from planner.errors import GGUFError
    from planner.gguf import read_gguf
    from tests.support.oracle.oracle import measure
    from tests.support.tiny import write_tiny_model

    extra = {k: v for k, v in ZOO["granite"].extra_kv.items() if not k.endswith("logit_scale")}
    granite = write_tiny_model(tmp_path / "granite.gguf", ZOO["granite"].with_(extra_kv=extra))
    with pytest.raises(RuntimeError, match="logit_scale"):
        measure(granite, [{"n_ctx": 512}])
    with pytest.raises(GGUFError, match="logit_scale"):
        load_anatomy(read_gguf(granite))
    jamba = ZOO["jamba"]
    jamba = jamba.with_(extra_kv={**jamba.extra_kv, "jamba.ssm.inner_size": 384})
    with pytest.raises(GGUFError, match="twice the embedding length"):
        load_anatomy(read_gguf(write_tiny_model(tmp_path / "jamba.gguf", jamba)))


def test_an_mpt_with_qk_norms_aborts_llama_cpp_and_is_refused_by_the_planner(tmp_path: Path) -> None:
    """MPT's graph reshapes a view of its fused QKV projection when the file has Q/K norms: llama.cpp
    aborts building the context (GGML_ASSERT), so the planner refuses the header up front."""
    from planner.anatomy import load_anatomy
    from planner.errors import ModelError
    from planner.gguf import read_gguf
    from tests.support.oracle.oracle import OracleAborted, measure
    from tests.support.tiny import write_tiny_model

    spec = ZOO["mpt-positions"].with_(name="tiny mpt qk-norm")
    path = write_tiny_model(tmp_path / "mpt-qk-norm.gguf", spec)
    with pytest.raises(OracleAborted) as died:
        measure(path, [{"n_ctx": 512}])
    assert died.value.rows == [] and died.value.returncode < 0  # killed by its abort building the graph
    with pytest.raises(ModelError, match="would abort"):
        load_anatomy(read_gguf(path))


def test_quantized_k_head_sizes_are_checked_as_llama_cpp_checks_them(tmp_path: Path) -> None:
    """llama.cpp checks head sizes against the K cache type's block only with flash attention: 14
    heads of 16 over 2 KV heads (K rows of 32 values) load with a q8_0 K cache and flash attention off
    (the planner refused them), and are refused with it on; one KV head of 16 (a K row of 16) makes
    ggml abort without flash attention, so the planner refuses that configuration."""
    from planner.anatomy import load_anatomy
    from planner.config import LoadConfig
    from planner.errors import ConfigError
    from planner.gguf import read_gguf
    from planner.hardware import GiB, Host
    from planner.memory import plan_memory
    from tests.support.oracle.oracle import OracleAborted, measure
    from tests.support.tiny import TinySpec, write_tiny_model

    two = write_tiny_model(tmp_path / "two.gguf", TinySpec("qwen2", n_embd=224, n_head=14, n_head_kv=2))
    configs = [{"n_ctx": 512, "type_k": "q8_0"}, {"n_ctx": 512, "type_k": "q8_0", "flash_attn": True}]
    rows = compare_cpu(two, configs)
    _assert_exact(rows, configs, refused=lambda config: bool(config.get("flash_attn")))
    one = write_tiny_model(tmp_path / "one.gguf", TinySpec("qwen2", n_embd=224, n_head=14, n_head_kv=1))
    with pytest.raises(OracleAborted) as died:
        measure(one, [{"n_ctx": 512, "type_k": "q8_0"}])
    assert died.value.rows == [] and died.value.returncode < 0  # the process died in a GGML_ASSERT
    config = LoadConfig(n_gpu_layers=0, n_ctx=512, type_k="q8_0")
    with pytest.raises(ConfigError, match="would abort"):
        plan_memory(load_anatomy(read_gguf(one)), config, [], Host(64 * GiB, 64 * GiB, frozenset()))

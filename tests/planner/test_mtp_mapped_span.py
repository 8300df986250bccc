"""The host's mapped weights span every tensor the loader maps, the skipped ones between them included: a
DeepSeek V3.2 or GLM DSA with a next-token-prediction (MTP) layer has that layer's tensors skipped, but its
router bias (ffn_exp_probs_b) is created without the skip flag and loaded. With the globals written before the
layers, as some conversions order them, the mapping then reaches over the skipped block to the bias."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import has_compiler
from tests.support.compare import compare_cpu
from tests.support.tiny import write_tiny_model
from tests.support.tiny.deepseek32 import MTP_MODELS

pytestmark = [pytest.mark.llama, pytest.mark.skipif(not has_compiler(), reason="the oracle needs a C compiler")]

CONFIGS = [{"n_ctx": 512}, {"n_ctx": 4096, "flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"}]


@pytest.mark.parametrize("name", sorted(MTP_MODELS))
def test_the_mapping_reaches_the_mtp_layers_router_bias(name: str, tmp_path: Path) -> None:
    rows = compare_cpu(write_tiny_model(tmp_path / f"{name}.gguf", MTP_MODELS[name]), CONFIGS)
    assert [row.config for row in rows] == CONFIGS
    for row in rows:
        assert not row.refused_by_llama and not row.refused_by_planner
        assert [(b.kind, b.error) for b in row.buffers if b.error] == [], row.config
        weights = row.buffer("weights")
        assert weights is not None and weights.actual > 0

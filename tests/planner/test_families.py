"""The house of architectures: one family module each, behind one lazy registry."""

from __future__ import annotations

import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

from planner.anatomy import load_anatomy
from planner.archs import FAMILIES, NO_CACHE_ARCHS
from planner.errors import ModelError
from planner.gguf import read_gguf
from tests.support import tiny
from tests.support.tiny import ZOO

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module_name", sorted(set(FAMILIES.values())))
def test_every_family_module_reads_its_header_and_builds_its_graph(module_name: str) -> None:
    module = import_module(f"planner.archs.{module_name}")
    assert callable(module.read_hparams) and callable(module.build_graph)
    assert module.__doc__, "a family module says which llama.cpp sources it follows"


@pytest.mark.parametrize("module_name", sorted(set(FAMILIES.values())))
def test_every_family_has_a_tiny_model_module_with_its_own_zoo(module_name: str) -> None:
    """tests/support/tiny mirrors planner/archs: a family module there, its line in tiny.FAMILIES, and
    zoo specs of the family's own architectures."""
    assert module_name in tiny.FAMILIES, f"tests/support/tiny/__init__.py: FAMILIES lacks {module_name!r}"
    module = import_module(f"tests.support.tiny.{module_name}")
    assert callable(module.layer_tensors) and callable(module.global_tensors)
    assert module.__doc__, "a tiny-model module says which planner family it mirrors"
    assert module.ZOO, f"tests/support/tiny/{module_name}.py has no zoo model"
    assert {FAMILIES[spec.arch] for spec in module.ZOO.values()} == {module_name}


def test_the_tiny_registry_lists_each_family_once_and_no_other() -> None:
    assert sorted(tiny.FAMILIES) == sorted(set(FAMILIES.values()))
    modules = [import_module(f"tests.support.tiny.{name}") for name in tiny.FAMILIES]
    assert sum(len(module.ZOO) for module in modules) == len(ZOO), "a zoo name stands in two family modules"


def test_every_exact_architecture_has_a_tiny_model_that_llama_cpp_loads() -> None:
    """An architecture counts as exact only with a zoo model the accuracy tests compare with llama.cpp."""
    in_zoo = {spec.arch for spec in ZOO.values()}
    assert sorted(set(FAMILIES) - in_zoo) == []
    assert not set(FAMILIES) & set(NO_CACHE_ARCHS)


def test_a_plan_imports_only_its_own_family(zoo: dict[str, Path]) -> None:
    code = (
        "import sys\n"
        "from planner.anatomy import load_anatomy\n"
        "from planner.gguf import read_gguf\n"
        "from planner.hardware import Host\n"
        "from planner.fit import solve\n"
        f"model = load_anatomy(read_gguf({str(zoo['gemma3'])!r}))\n"
        "solve(model, [], Host(total=16 << 30, free=8 << 30))\n"
        "print(sorted(m for m in sys.modules if m.startswith('planner.archs.')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['planner.archs.common', 'planner.archs.gemma']"


@pytest.mark.parametrize(
    ("accessor", "reason"),
    [
        ("moe", "expert_count"),
        ("state_space", "ssm.conv_kernel"),
        ("latent_attention", "attention.kv_lora_rank"),
        ("sparse_indexer", "attention.indexer.head_count"),
        ("rwkv_hparams", "wkv.head_size"),
        ("granite_scales", "Granite's scales"),
        ("alt_up", "AltUp sizes"),
    ],
)
def test_a_family_record_the_model_lacks_is_a_model_error(zoo: dict[str, Path], accessor: str, reason: str) -> None:
    """A graph reaching for a record its model has none of stops with a reason, not on None."""
    plain = load_anatomy(read_gguf(str(zoo["llama-f16"])))
    with pytest.raises(ModelError, match=reason):
        getattr(plain, accessor)

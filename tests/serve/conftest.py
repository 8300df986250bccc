"""What the server's tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.grammar_check import Vocabulary
from tests.support.serve import Served, served_file


@pytest.fixture(scope="session")
def vocabulary(gemma_path: Path) -> Iterator[Vocabulary]:
    """The demo's vocabulary, to ask llama.cpp's grammar sampler what a grammar lets a model write."""
    v = Vocabulary(gemma_path)
    yield v
    v.close()


@pytest.fixture(scope="module")
def served_demo(gemma_path: Path) -> Iterator[Served]:
    """The demo loaded and served, for the tests of one module."""
    with served_file(gemma_path) as s:
        yield s

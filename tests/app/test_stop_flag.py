"""The engine's stop request as llama.cpp reads it: in C after every node of a graph, and a stop asked
while a long prompt is read ends the reading where it is."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.engine import GenerationParams
from app.engine.process import EngineProcess
from app.engine.stop_flag import StopFlag
from app.engine.types import PromptProgress
from planner.config import LoadConfig


def test_llama_cpp_reads_the_stop_through_a_c_function_that_answers_as_the_flag_says() -> None:
    flag = StopFlag()
    callback, data, in_c = flag.abort_callback()
    assert in_c or sys.platform == "win32"  # Linux and macOS: the C library's strlen, no Python per node
    assert callback(data) is False and not flag.is_set()
    flag.set()
    assert callback(data) is True and flag.is_set()
    flag.clear()
    assert callback(data) is False and not flag.is_set()


@pytest.mark.llama
def test_a_stop_while_a_long_prompt_is_read_ends_the_reading_mid_prompt(gemma_path: Path) -> None:
    """Esc during a long prompt: llama.cpp aborts the batch it is in, the rest is never read, and the
    engine answers the next question."""
    engine = EngineProcess()
    try:
        engine.load(str(gemma_path), LoadConfig(n_ctx=2048, n_batch=64, n_ubatch=64))
        prompt = engine.tokenize("the quick brown fox jumps over the lazy dog " * 200)[:1500]
        told: list[PromptProgress] = []

        def on_progress(progress: PromptProgress) -> None:
            told.append(progress)
            engine.stop()  # at the first word of reading: the child is about a batch in, of 24

        replies = list(engine.generate(prompt, GenerationParams(max_tokens=8, temperature=0.0), on_progress))
        stats = engine.last_stats
        assert replies == [] and stats.stopped_by == "user"
        assert stats.prompt_read < 1000 and engine.kv_cells_used() < 1000
        assert list(engine.generate(prompt[:20], GenerationParams(max_tokens=2, temperature=0.0)))
    finally:
        engine.close()

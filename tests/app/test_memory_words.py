"""One vocabulary for memory: every word F1's glossary defines is the word the panels show."""

from __future__ import annotations

from app.memory_words import MEANING, OTHER_PROGRAMS
from app.telemetry.memory_map import WORDS
from app.tui.screens.help import HELP
from app.tui.widgets.buffers import COLUMNS


def test_f1_defines_each_word_once() -> None:
    for word, meaning in MEANING.items():
        assert f"**{word[0].upper() + word[1:]}**: {meaning}." in HELP
        assert HELP.count(f"**{word[0].upper() + word[1:]}**:") == 1, word


def test_the_map_and_the_table_use_the_words() -> None:
    labels = {label for label, _ in WORDS.values()}
    assert OTHER_PROGRAMS in labels and not any("committed" in label for label in labels)
    assert COLUMNS[1:3] == ("planned", "allocated")  # not "actual": allocated is what llama.cpp says it holds

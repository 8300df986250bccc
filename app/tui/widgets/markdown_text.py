"""Whether Markdown, drawn, shows any words: a reply such as " 1. 2. 3. ... 124." parses as empty nested
lists, which the Markdown widget draws as nothing at all; such a reply is shown as its plain text."""

from __future__ import annotations

from functools import cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

_WORDS = ("text", "code_inline")  # inline tokens the widget draws as words
_BLOCKS = ("fence", "code_block")  # block tokens whose content is drawn as it is


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("gfm-like")  # as textual.widgets.Markdown parses by default


def _shows(tokens: list[Token]) -> bool:
    for token in tokens:
        if token.type in _WORDS + _BLOCKS and token.content.strip():
            return True
        if token.children and _shows(token.children):
            return True
    return False


def shows_text(markdown: str) -> bool:
    """Whether `markdown` drawn by the Markdown widget shows any visible text (False for a blank one too)."""
    return bool(markdown.strip()) and _shows(_parser().parse(markdown))

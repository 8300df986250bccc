"""Fill in the middle (`suffix` on /v1/completions, as editors' code completion sends it): a tiny model whose
header names its FIM tokens, served for real; the prompt laid out as llama.cpp's server lays out an infill,
and a model without FIM tokens refused in words."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from app.serve.prompts import infill_prompt
from tests.support.serve import Served, served_file
from tests.support.tiny import ZOO, write_tiny_model

pytestmark = pytest.mark.llama
BEFORE = "def add(a, b):\n    return "
AFTER = "\n\nprint(add(1, 2))\n"


def _tiny(folder: Path, fim: bool) -> Path:
    spec = ZOO["llama-q8_0"]
    n = spec.n_vocab
    keys = ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id")
    extra = dict(zip(keys, (n - 3, n - 2, n - 1), strict=True)) if fim else {}
    spec = dataclasses.replace(spec, extra_kv={**spec.extra_kv, **extra})
    return write_tiny_model(folder / ("tiny-fim.gguf" if fim else "tiny-plain.gguf"), spec)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_file(_tiny(tmp_path_factory.mktemp("fim"), fim=True), n_ctx=512, name="tiny") as s:
        yield s


def test_the_gap_is_laid_out_in_the_models_fim_tokens(served: Served) -> None:
    model = served.session.model
    assert model is not None and model.report.fim_tokens is not None
    pre, suf, mid = model.report.fim_tokens
    engine = served.session.engine

    def tokenize(text: str, add_special: bool) -> list[int]:
        return engine.tokenize(text, add_special, False)

    prepared = infill_prompt(BEFORE, AFTER, model.report.fim_tokens, model.report.n_vocab, tokenize)
    bos = tokenize("", True)
    assert prepared.prompt == [*bos, pre, *tokenize(BEFORE, False), suf, *tokenize(AFTER, False), mid]
    reply = served.client().completions.create(model="tiny", prompt=BEFORE, suffix=AFTER, max_tokens=6, temperature=0)
    assert reply.usage.prompt_tokens == prepared.n_tokens and reply.usage.completion_tokens >= 1
    streamed = served.client().completions.create(
        model="tiny", prompt=BEFORE, suffix=AFTER, max_tokens=6, temperature=0, stream=True
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices) == reply.choices[0].text


def test_a_suffix_where_it_cannot_be_filled_is_refused_in_words(
    served: Served, tmp_path_factory: pytest.TempPathFactory
) -> None:
    client = served.client()
    with pytest.raises(openai.BadRequestError, match="send it to /v1/completions"):
        client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "x"}], extra_body={"suffix": AFTER}
        )
    with pytest.raises(openai.BadRequestError, match="not JSON"):
        client.completions.create(
            model="tiny", prompt=BEFORE, suffix=AFTER, extra_body={"response_format": {"type": "json_object"}}
        )
    with served_file(_tiny(tmp_path_factory.mktemp("plain"), fim=False), n_ctx=512, name="tiny") as plain:
        with pytest.raises(openai.BadRequestError, match="no fill-in-the-middle tokens") as caught:
            plain.client().completions.create(model="tiny", prompt=BEFORE, suffix=AFTER, max_tokens=4)
        assert caught.value.code == "fim_not_supported"
        reply = plain.client().completions.create(model="tiny", prompt=BEFORE, max_tokens=2)
        assert reply.choices[0].text

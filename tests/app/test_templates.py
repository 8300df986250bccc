"""Chat formats: the GGUF's template in a bounded sandbox, family defaults, and the base-model transcript."""

from __future__ import annotations

import time

import pytest

from app.engine.templates import (
    TRANSCRIPT_STOPS,
    ChatMessage,
    TemplateError,
    choose_format,
    render,
    render_jinja,
)

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONVERSATION = [ChatMessage("system", "Be brief."), ChatMessage("user", "What is 2+2?")]


def test_the_models_own_template_is_rendered() -> None:
    fmt = choose_format({"tokenizer.chat_template": CHATML}, "qwen2")
    assert fmt.kind == "jinja"
    out = render(fmt, CONVERSATION)
    assert (
        out == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_a_base_model_without_template_gets_the_qa_transcript() -> None:
    fmt = choose_format({"general.name": "Gemma 3 270m"}, "gemma3", "gemma-3-270m-q4_k_m.gguf")
    assert fmt.kind == "transcript"
    assert fmt.stop == TRANSCRIPT_STOPS and "\nQ:" in fmt.stop
    prompt = render(fmt, [ChatMessage("user", "What is the capital of France?")])
    assert prompt == "Q: What is the capital of Japan?\nA: Tokyo.\nQ: What is the capital of France?\nA:"


def test_an_instruction_tuned_model_without_template_gets_its_family_format() -> None:
    fmt = choose_format({"general.name": "Gemma 3 1b it"}, "gemma3", "gemma-3-1b-it-Q4_K_M.gguf")
    assert fmt.name == "gemma" and "<end_of_turn>" in fmt.stop
    out = render(fmt, CONVERSATION)
    assert out.endswith("<start_of_turn>model\n") and "Be brief.\n\nWhat is 2+2?" in out


@pytest.mark.parametrize(
    "template, message",
    [
        ("{% for i in range(10**9) %}x{% endfor %}", "range|stopped|too much|failed"),
        (
            "{% for a in range(9000) %}{% for b in range(9000) %}{{ a }}{% endfor %}{% endfor %}",
            "too much work|absurdly long",
        ),
        ("{{ messages.__class__.__mro__[1].__subclasses__() }}", "stopped|unsafe|failed"),
        ("{{ raise_exception('only user and assistant roles are supported') }}", "refused: only user"),
        ("{% for m in messages %}{{ m.content", "failed"),
        ("x" * (300 * 1024), "larger than"),
    ],
)
def test_hostile_or_broken_templates_end_in_a_clear_error_quickly(template: str, message: str) -> None:
    started = time.perf_counter()
    with pytest.raises(TemplateError, match=message):
        render_jinja(template, CONVERSATION, "<s>", "</s>")
    assert time.perf_counter() - started < 10  # a hang guard, not a speed target


def test_unsafe_attributes_render_as_nothing() -> None:
    assert render_jinja("[{{ ''.__class__ }}][{{ messages.__init__ }}]", CONVERSATION, "", "") == "[][]"

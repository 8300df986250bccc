"""Chat formats: the GGUF's template in a bounded sandbox, family defaults, and the base-model transcript."""

from __future__ import annotations

import time

import pytest

from app.conversation.templates import (
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


# -- templates whose cost the sandbox's step counter cannot see: bounded by the child process ----------

CHATML_FAMILY = {"general.name": "Tiny Chat Instruct"}


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> float:
    from app.conversation import template_sandbox

    monkeypatch.setattr(template_sandbox, "DEADLINE_SECONDS", 2.0)
    return 2.0


@pytest.mark.parametrize(
    "costly",
    [
        "{% for a in 'x'*100000 %}{% for b in 'x'*100000 %}y{% endfor %}{% endfor %}",  # loops over strings
        "{% set n = 10 %}{% set x = n**(n**9) %}{{ x }}",  # big-integer arithmetic
        "{{ 'a' * (messages|length * 1500000000) }}",  # 1.5 GB of string
        "{{ lipsum(200000) }}",  # 11 s in process
    ],
)
def test_a_template_over_its_time_or_memory_gives_way_to_the_family_format(costly: str, short_deadline: float) -> None:
    import psutil

    from app.conversation.templates import fallback_note

    template = costly + CHATML  # unique per case: a stopped template is remembered by its text
    fmt = choose_format({**CHATML_FAMILY, "tokenizer.chat_template": template}, "qwen2")
    rss_before = psutil.Process().memory_info().rss
    started = time.monotonic()

    out = render(fmt, CONVERSATION)

    assert time.monotonic() - started < short_deadline + 3  # the deadline, the kill, a new child
    assert out.endswith("<|im_start|>assistant\n")  # the chatml format of the family, built in
    assert fallback_note(fmt).startswith("The model's chat template was stopped (")
    assert "using the chatml format instead" in fallback_note(fmt)
    assert psutil.Process().memory_info().rss - rss_before < 200 << 20  # the app's own memory untouched
    started = time.monotonic()
    assert render(fmt, CONVERSATION) == out  # not run a second time
    assert time.monotonic() - started < 0.5


def test_a_reply_in_the_fallback_format_ends_at_its_stop_strings(short_deadline: float) -> None:
    """The chatml fallback ends a turn with <|im_end|>: without it the reply ran on past its turn."""
    from app.conversation.templates import stops_in_use

    template = "{% for a in 'x'*99989 %}{% for b in 'x'*99989 %}z{% endfor %}{% endfor %}" + CHATML
    fmt = choose_format({**CHATML_FAMILY, "tokenizer.chat_template": template}, "qwen2")
    assert stops_in_use(fmt) == fmt.stop  # the template's own while it renders
    render(fmt, CONVERSATION)
    assert "<|im_end|>" in stops_in_use(fmt) and set(fmt.stop) <= set(stops_in_use(fmt))


def test_a_stopped_template_leaves_no_process_busy(short_deadline: float) -> None:
    import psutil

    from app.conversation import template_sandbox

    fmt = choose_format(
        {"tokenizer.chat_template": "{% for a in 'x'*99991 %}{% for b in 'x'*99991 %}{% endfor %}{% endfor %}"}, "llama"
    )
    render(fmt, CONVERSATION)  # a base model's family: the transcript
    children = psutil.Process().children(recursive=True)
    busy = [c for c in children if "template_child" in " ".join(c.cmdline()) and c.cpu_percent(0.3) > 50]
    assert busy == []
    assert template_sandbox.over_budget(fmt.template)


def test_a_template_that_refuses_still_says_why() -> None:
    fmt = choose_format({"tokenizer.chat_template": "{{ raise_exception('roles must alternate') }}"}, "qwen2")
    with pytest.raises(TemplateError, match="refused: roles must alternate"):
        render(fmt, CONVERSATION)


@pytest.mark.llama
def test_a_model_whose_template_hangs_still_answers_in_its_family_format(tmp_path) -> None:
    """`vramchat MODEL -p` with a template that loops over strings (150 s+ before): the deadline, one line
    saying so, and the answer."""
    import dataclasses
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.tiny import ZOO, write_tiny_model

    hang = "{% for a in 'x'*100000 %}{% for b in 'x'*100000 %}y{% endfor %}{% endfor %}" + CHATML
    spec = ZOO["qwen2-q4_0"]
    spec = dataclasses.replace(spec, extra_kv={**spec.extra_kv, "tokenizer.chat_template": hang})
    model = write_tiny_model(tmp_path / "tiny-chat-instruct.gguf", spec)
    vramchat = str(Path(sys.executable).with_name("vramchat"))
    env = {**__import__("os").environ, "VRAMCHAT_HOME": str(tmp_path / "home")}
    started = time.monotonic()
    proc = subprocess.run(
        [vramchat, str(model), "-p", "Hi", "-n", "4", "--temp", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "vramchat: The model's chat template was stopped (" in proc.stderr  # its time or its memory
    assert "): using the chatml format instead." in proc.stderr
    assert "please report this" not in proc.stderr
    assert time.monotonic() - started < 90

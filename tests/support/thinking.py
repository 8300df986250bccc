"""Replies of reasoning models as they stream (recorded in the families' own markers, shortened), and a
chat template that thinks: ChatML whose generation prompt opens `<think>` itself unless the chat turns
thinking off (`enable_thinking`, as Qwen3's and GLM-4.5's templates read it). It renders earlier replies
as they are given, so a prompt without their reasoning shows that vramchat left it out."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gguf import GGMLQuantizationType

THINKING_CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{% else %}{{ '<think>\\n' }}{% endif %}{% endif %}"
)

# (family, the reply as the engine streams it, its reasoning, its answer)
RECORDED = [
    (
        "qwen3",
        "<think>\nOkay, the user asks for the capital of France. That is Paris; no need to overthink it.\n"
        "</think>\n\nThe capital of France is **Paris**.",
        "Okay, the user asks for the capital of France. That is Paris; no need to overthink it.",
        "The capital of France is **Paris**.",
    ),
    (
        "qwen3 /no_think",
        "<think>\n\n</think>\n\nParis.",
        "",
        "Paris.",
    ),
    (
        "deepseek-r1-distill (the template opened the block)",
        "<think>\nAlright, so I need to figure out 7 times 8. Let me think... 7 times 8 is 56.\n"
        "Wait, let me double-check: 8 + 8 + 8 + 8 + 8 + 8 + 8 = 56. Yes.\n</think>\n\n"
        "7 × 8 = **56**.\n\n```python\nprint(7 * 8)\n```",
        "Alright, so I need to figure out 7 times 8. Let me think... 7 times 8 is 56.\n"
        "Wait, let me double-check: 8 + 8 + 8 + 8 + 8 + 8 + 8 = 56. Yes.",
        "7 × 8 = **56**.\n\n```python\nprint(7 * 8)\n```",
    ),
    (
        "glm-4.5",
        "\n<think>The user wants a haiku about autumn. Five, seven, five syllables.</think>\n"
        "Red leaves drift and fall\nquiet rivers carry them\nthe year exhales slow",
        "The user wants a haiku about autumn. Five, seven, five syllables.",
        "Red leaves drift and fall\nquiet rivers carry them\nthe year exhales slow",
    ),
    (
        "gpt-oss (llama.cpp drops <|end|>)",
        '<|channel|>analysis<|message|>User asks: "What is 2+2?" Simple arithmetic. Answer: 4.'
        "<|start|>assistant<|channel|>final<|message|>2 + 2 = **4**.",
        'User asks: "What is 2+2?" Simple arithmetic. Answer: 4.',
        "2 + 2 = **4**.",
    ),
    (
        "gpt-oss (special tokens rendered)",
        "<|channel|>analysis<|message|>We need to list three primes. 2, 3, 5.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>2, 3 and 5.<|return|>",
        "We need to list three primes. 2, 3, 5.",
        "2, 3 and 5.",
    ),
    (
        "magistral",
        "[THINK]The user asks for 2 + 3. Adding: 5.[/THINK]2 + 3 = **5**.",
        "The user asks for 2 + 3. Adding: 5.",
        "2 + 3 = **5**.",
    ),
    (
        "command-a reasoning",
        "<|START_THINKING|>A greeting: answer in kind.<|END_THINKING|>Hello! How can I help?",
        "A greeting: answer in kind.",
        "Hello! How can I help?",
    ),
    (
        "seed-oss",
        "<seed:think>Three colours of a flag: red, white, blue.</seed:think>Red, white and blue.",
        "Three colours of a flag: red, white, blue.",
        "Red, white and blue.",
    ),
    (
        "gemma 3 (no reasoning; the answer quotes the tag)",
        "Models such as Qwen3 wrap their thoughts in `<think>` tags, closed by `</think>`.",
        "",
        "Models such as Qwen3 wrap their thoughts in `<think>` tags, closed by `</think>`.",
    ),
]


def write_thinking_model(path: Path) -> Path:
    """A tiny Qwen2 model (random weights: its words mean nothing) whose chat template thinks: the
    prompt opens `<think>`, so whatever it writes is reasoning until it closes the block."""
    from tests.support.tiny import ZOO, write_tiny_model

    spec = ZOO["qwen2-q4_0"]
    spec = dataclasses.replace(
        spec,
        extra_kv={**spec.extra_kv, "tokenizer.chat_template": THINKING_CHATML},
        never_ends=True,  # its reply runs to the token limit: thoughts to time and count
        output_type=GGMLQuantizationType.F16,  # (never_ends zeroes rows of an unquantized output matrix)
    )
    return write_tiny_model(path, spec)

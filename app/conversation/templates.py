"""Chat prompt formats: the GGUF's own template, a family default, or a plain transcript.

A GGUF template is untrusted code: it is rendered only in Jinja's immutable
sandbox, with ranges, output size and work bounded, in a process of its own whose
time and memory the kernel bounds (app/conversation/template_sandbox.py).
A base model without a template gets a transcript ("Q: ...\\nA:") that stops at
the next question, the format short factual prompts work best with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.conversation.template_errors import TemplateBudgetError, TemplateError

__all__ = ["TemplateBudgetError", "TemplateError"]  # re-exported: callers import them from here

# a value a chat template's own variable is given (`enable_thinking`, gpt-oss's `reasoning_effort`, a server
# client's chat_template_kwargs)
TemplateValue = bool | str | int | float

MAX_TEMPLATE_BYTES = 256 * 1024
MAX_RENDER_CHARS = 4 * 1024 * 1024
MAX_RENDER_STEPS = 200_000
MAX_RENDER_SECONDS = 2.0
MAX_TEMPLATE_RANGE = 10_000


@dataclass(frozen=True)
class ChatMessage:
    role: str  # system, user, assistant
    content: str
    media: tuple[str, ...] = ()  # the images (or sounds) sent with it, by content hash (app.attachments)


@dataclass(frozen=True)
class ChatFormat:
    name: str
    kind: str  # "jinja" (from the GGUF), "builtin" (a family default) or "transcript"
    template: str = ""
    stop: tuple[str, ...] = ()
    add_bos: bool = True
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    fallback: ChatFormat | None = None  # what a template over its budget gives way to (the family's format)


# --- sandboxed Jinja ---------------------------------------------------------------------------


def _sandbox():  # imported lazily: jinja2 is only needed once a model with a template is loaded
    import time

    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        """Counts attribute lookups, calls, loop steps over ranges and outputs; a template that
        does too much work, or takes too long, is stopped."""

        steps = 0
        started = 0.0

        def _tick(self) -> None:
            self.steps += 1
            if self.steps > MAX_RENDER_STEPS:
                raise SecurityError("the chat template does too much work")
            if self.steps % 1024 == 0 and time.perf_counter() - self.started > MAX_RENDER_SECONDS:
                raise SecurityError("the chat template takes too long")

        def getattr(self, obj: Any, attribute: str) -> Any:
            self._tick()
            return super().getattr(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            self._tick()
            return super().getitem(obj, argument)

        def call(self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            self._tick()
            return super().call(__context, __obj, *args, **kwargs)

    return BoundedSandbox, SecurityError


def render_jinja(
    template: str,
    messages: list[ChatMessage] | list[dict[str, Any]],
    bos: str,
    eos: str,
    add_generation_prompt: bool = True,
    switches: Mapping[str, TemplateValue] | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> str:
    """`switches`: the template's own variables the chat sets (`enable_thinking`), or a server's client does.
    `messages` may be the
    wire's dicts, with an assistant's `tool_calls` and a tool's `tool_call_id` (the server's); `tools` the
    functions a server's client offers (OpenAI's list)."""
    if len(template.encode("utf-8", errors="replace")) > MAX_TEMPLATE_BYTES:
        raise TemplateError(f"the chat template is larger than {MAX_TEMPLATE_BYTES // 1024} KiB")
    from jinja2 import TemplateError as JinjaError

    bounded, security_error = _sandbox()
    import time

    env = bounded(trim_blocks=True, lstrip_blocks=True)
    env.started = time.perf_counter()

    def finalize(value: object) -> object:
        env._tick()
        return value

    env.finalize = finalize

    def counted_range(*args: int):
        values = range(*args)
        if len(values) > MAX_TEMPLATE_RANGE:
            raise OverflowError(f"the chat template asks for a range of {len(values):,} items")
        for value in values:
            env._tick()
            yield value

    def raise_exception(message: str) -> None:
        raise TemplateError(f"the chat template refused: {message}")

    def strftime_now(fmt: str) -> str:
        import datetime

        return datetime.datetime.now().strftime(fmt)

    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, range=counted_range)
    try:
        compiled = env.from_string(template)
        out = compiled.render(
            messages=[m if isinstance(m, dict) else {"role": m.role, "content": m.content} for m in messages],
            add_generation_prompt=add_generation_prompt,
            bos_token=bos,
            eos_token=eos,
            tools=tools or None,
            **(switches or {}),
        )
    except TemplateError:
        raise
    except security_error as exc:
        raise TemplateBudgetError(f"the chat template was stopped: {exc}") from None
    except MemoryError:
        raise TemplateBudgetError("the chat template asked for more memory than it may use") from None
    except (
        JinjaError,
        TypeError,
        ValueError,
        KeyError,
        IndexError,
        AttributeError,
        RecursionError,
        OverflowError,
    ) as exc:
        raise TemplateError(f"the chat template failed: {exc}") from None
    if len(out) > MAX_RENDER_CHARS:
        raise TemplateBudgetError("the chat template produced an absurdly long prompt")
    return out


# --- built-in formats ----------------------------------------------------------------------------


def _gemma(messages: list[ChatMessage]) -> str:
    out, system = [], ""
    for m in messages:
        if m.role == "system":
            system = m.content + "\n\n"
            continue
        role = "model" if m.role == "assistant" else "user"
        content = (system + m.content) if role == "user" and system else m.content
        system = "" if role == "user" else system
        out.append(f"<start_of_turn>{role}\n{content}<end_of_turn>\n")
    return "".join(out) + "<start_of_turn>model\n"


def _chatml(messages: list[ChatMessage]) -> str:
    return "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"


def _llama3(messages: list[ChatMessage]) -> str:
    body = "".join(f"<|start_header_id|>{m.role}<|end_header_id|>\n\n{m.content}<|eot_id|>" for m in messages)
    return body + "<|start_header_id|>assistant<|end_header_id|>\n\n"


def _phi3(messages: list[ChatMessage]) -> str:
    return "".join(f"<|{m.role}|>\n{m.content}<|end|>\n" for m in messages) + "<|assistant|>\n"


# One worked exchange before the conversation shows a base model what a Q/A transcript is for: short,
# direct answers. Without it the demo (Gemma 3 270M) answered "Italy is the capital of Italy." and
# "Spain is the capital of Spain." even greedily; with it, "Rome." and "Madrid." (measured: 8 short
# factual questions, greedy, 5 of 8 right without it, 7 of 8 with it).
TRANSCRIPT_PRIMER = ("What is the capital of Japan?", "Tokyo.")


def transcript(messages: list[ChatMessage]) -> str:
    """A plain Q/A transcript for base models: the system prompt leads, then one worked exchange
    (TRANSCRIPT_PRIMER), then each turn as Q:/A:."""
    lines: list[str] = []
    primed = False
    for m in messages:
        if m.role != "system" and not primed:
            lines += [f"Q: {TRANSCRIPT_PRIMER[0]}", f"A: {TRANSCRIPT_PRIMER[1]}"]
            primed = True
        if m.role == "system":
            lines.append(m.content.strip())
        elif m.role == "user":
            lines.append(f"Q: {m.content.strip()}")
        else:
            lines.append(f"A: {m.content.strip()}")
    return "\n".join(lines) + "\nA:"


BUILTIN = {
    "gemma": (_gemma, ("<end_of_turn>",)),
    "chatml": (_chatml, ("<|im_end|>",)),
    "llama3": (_llama3, ("<|eot_id|>",)),
    "phi3": (_phi3, ("<|end|>",)),
}
TRANSCRIPT_STOPS = ("\nQ:", "\n\nQ", "\nA:")
_FAMILY = {
    "gemma": "gemma",
    "gemma2": "gemma",
    "gemma3": "gemma",
    "qwen2": "chatml",
    "qwen3": "chatml",
    "qwen2moe": "chatml",
    "qwen3moe": "chatml",
    "phi3": "phi3",
}
_INSTRUCT_HINTS = ("instruct", "-it", "_it", " it ", "chat", "-sft", "assistant")


def choose_format(metadata: dict[str, Any], architecture: str, file_name: str = "") -> ChatFormat:
    """The GGUF's template when it has one; else a family default for instruction-tuned
    models; else the transcript format for base models."""
    template = metadata.get("tokenizer.chat_template")
    if isinstance(template, str) and template.strip():
        without = {k: v for k, v in metadata.items() if k != "tokenizer.chat_template"}
        fallback = choose_format(without, architecture, file_name)
        return ChatFormat("gguf", "jinja", template, description="the model's own chat template", fallback=fallback)
    name = f"{metadata.get('general.name', '')} {metadata.get('general.finetune', '')} {file_name}".lower()
    family = _FAMILY.get(architecture)
    if architecture == "llama" and "llama-3" in name.replace(" ", "-"):
        family = "llama3"
    if family and any(hint in name for hint in _INSTRUCT_HINTS):
        _, stops = BUILTIN[family]
        return ChatFormat(
            family, "builtin", stop=stops, description=f"no template in the file: the {family} format of its family"
        )
    return ChatFormat(
        "transcript",
        "transcript",
        stop=TRANSCRIPT_STOPS,
        description="a base model without a chat template: a plain Q/A transcript",
    )


def fallback_note(fmt: ChatFormat) -> str:
    """One line when the model's template went over its budget and its family's format is used, else ''."""
    if fmt.kind != "jinja" or fmt.fallback is None:
        return ""
    from app.conversation.template_sandbox import over_budget

    why = over_budget(fmt.template).removeprefix("the chat template was stopped: ")
    if not why:
        return ""
    instead = "a plain Q/A transcript" if fmt.fallback.kind == "transcript" else f"the {fmt.fallback.name} format"
    return f"The model's chat template was stopped ({why}): using {instead} instead."


def stops_in_use(fmt: ChatFormat) -> tuple[str, ...]:
    """The strings that end a reply: the format's own, and its fallback's once the template was
    stopped (a chatml fallback ends at `<|im_end|>`, which the GGUF's EOS alone would run past)."""
    if fmt.kind != "jinja" or fmt.fallback is None:
        return fmt.stop
    from app.conversation.template_sandbox import over_budget

    if not over_budget(fmt.template):
        return fmt.stop
    return fmt.stop + tuple(s for s in fmt.fallback.stop if s not in fmt.stop)


def render(
    fmt: ChatFormat,
    messages: list[ChatMessage],
    bos: str = "",
    eos: str = "",
    switches: Mapping[str, TemplateValue] | None = None,
    tools: list[dict[str, Any]] | None = None,
    wire: list[dict[str, Any]] | None = None,
) -> str:
    """The prompt in `fmt`. A GGUF template runs in its own process under a hard budget
    (app/conversation/template_sandbox.py); one that goes over it gives way to its family's format
    (`fallback_note` says so). `switches` go to a GGUF template as its variables (`enable_thinking`);
    `tools` and `wire` (the messages as dicts, tool calls and results in them) are a server's, for a
    template that takes tools (the other formats read `messages`)."""
    if fmt.kind == "jinja":
        from app.conversation.template_sandbox import TemplateOverBudget, render_bounded

        try:
            if wire is None:
                wire = [{"role": m.role, "content": m.content} for m in messages]
            return render_bounded(fmt.template, wire, bos, eos, switches=switches, tools=tools)
        except TemplateOverBudget as exc:
            if fmt.fallback is None:
                raise TemplateError(f"the chat template was stopped: {exc}") from None
            return render(fmt.fallback, messages, bos, eos)
    if fmt.kind == "builtin":
        return BUILTIN[fmt.name][0](messages)
    return transcript(messages)

"""A request's messages as the loaded model's prompt: rendered in its chat format (the GGUF's template in
the template sandbox, its family's format, or the transcript of a base model), with the client's tools
where the template takes them, each image as the projector's marker, then tokenized by the engine.

Nothing of a client's text reaches a shell or a path: images arrive as bytes, are written to a private
temporary file only to be checked and scaled by app.attachments (the chat's own checks: size, pixel count,
decodability), and are removed at once.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.conversation.reasoning import opened_marker, template_switches
from app.conversation.templates import ChatMessage, TemplateError, render
from app.engine.types import Media, MediaPrompt
from app.serve.errors import ApiError, bad_request
from app.serve.requests import ChatRequest, Image, Message
from app.serve.structured import PARAM, JsonFormat, reply_grammar
from app.serve.tools import family_of, forced_grammar

if TYPE_CHECKING:
    from app.session import LoadedModel


@dataclass(frozen=True)
class Prepared:
    """A prompt ready for the engine."""

    prompt: list[int] | MediaPrompt
    n_tokens: int
    opened_reasoning: bool = False  # the template opened `<think>`: the reply starts in its thoughts
    tool_family: str | None = None  # the tool-call format to read the reply in (None: no tools)
    grammar: str = ""  # a forced call's grammar, or a JSON reply's


Tokenize = Callable[[str], list[int]]
TokenizeText = Callable[[str, bool], list[int]]  # (text, add_special): special tokens' text read as text
TokenizeMedia = Callable[[MediaPrompt], list[int]]


def chat_prompt(
    request: ChatRequest, model: LoadedModel, tokenize: Tokenize, tokenize_media: TokenizeMedia | None
) -> Prepared:
    """The prompt for a chat request (worker thread: the template renders in its sandbox process)."""
    fmt = model.fmt
    tools_on = bool(request.tools) and request.tool_choice != "none"
    family = family_of(fmt.template) if fmt.kind == "jinja" else None
    if tools_on and family is None:
        raise bad_request(
            f"{model.name}'s chat template takes no tools (vramchat reads the tool calls of Qwen 2.5/3, Hermes, "
            "Llama 3.x, Mistral and gpt-oss templates): send the request without 'tools'",
            param="tools",
            code="tools_not_supported",
        )
    if any(m.role == "tool" or m.tool_calls for m in request.messages) and fmt.kind != "jinja":
        raise bad_request(f"{model.name} has no chat template for tool calls and results", param="messages")
    if tools_on and request.json_reply is not None:
        raise bad_request(
            "a request asks for a JSON reply or for tool calls, not both: send 'response_format' without 'tools' "
            "(or with tool_choice none)",
            param=PARAM,
        )
    if fmt.kind == "transcript" and request.messages[-1].role != "user":
        raise bad_request("a base model answers a question: the last message must be the user's", param="messages")
    images = [image for m in request.messages for image in m.images]
    if images and not model.sees:
        raise bad_request(
            f"{model.name} was loaded without a vision projector, so it cannot see images: serve it with its "
            "projector (--mmproj), or send the words alone",
            param="messages",
            code="images_not_supported",
        )
    media = _media(images, model) if images else ()
    marker = model.marker
    chat = [_chat_message(m, marker) for m in request.messages]
    wire = [_wire(m, marker) for m in request.messages]
    switches = (
        template_switches(fmt.template, request.thinking if request.thinking is not None else True)
        | dict(request.template_variables)
        if fmt.kind == "jinja"
        else {}
    )
    tools = [_tool_json(t) for t in request.tools] if tools_on else None
    try:
        text = render(fmt, chat, bos="", eos=model.eos, switches=switches, tools=tools, wire=wire)
    except TemplateError as exc:
        raise bad_request(f"the model's chat template refused these messages: {exc}", param="messages") from None
    grammar = ""
    opened = opened_marker(text)
    template = fmt.template if fmt.kind == "jinja" else ""
    thinks = template if request.thinking is not False else ""  # a template that lets the model think, now
    if (
        tools_on
        and family is not None
        and (request.tool_choice == "required" or request.tool_choice.startswith("function:"))
    ):
        try:
            grammar = forced_grammar(family, request.tools, request.tool_choice, opened, thinks)
        except ValueError as exc:
            raise bad_request(str(exc), param="tool_choice") from None
    if request.json_reply is not None:
        grammar = reply_grammar(request.json_reply, opened, template, thinking=request.thinking is not False)
    if media:
        assert tokenize_media is not None
        with_media = MediaPrompt(text, media)
        n_tokens = len(tokenize_media(with_media))
        prompt: list[int] | MediaPrompt = with_media
    else:
        prompt = tokenize(text)
        n_tokens = len(prompt)
    return Prepared(prompt, n_tokens, bool(opened), family if tools_on else None, grammar)


def completion_prompt(
    prompt: str | list[int], n_vocab: int, tokenize: Tokenize, json_reply: JsonFormat | None = None
) -> Prepared:
    """A completion's prompt: its text tokenized as it is, or its token ids checked against the vocabulary;
    with the grammar of a JSON reply where one is asked for (the text goes on in JSON)."""
    grammar = reply_grammar(json_reply) if json_reply is not None else ""
    if isinstance(prompt, list):
        _check_ids(prompt, n_vocab)
        return Prepared(list(prompt), len(prompt), grammar=grammar)
    tokens = tokenize(prompt)
    return Prepared(tokens, len(tokens), grammar=grammar)


def infill_prompt(
    prefix: str | list[int], suffix: str, fim: tuple[int, int, int] | None, n_vocab: int, tokenize: TokenizeText
) -> Prepared:
    """Fill in the middle: the text before the gap (the prompt) and after it (the suffix) in the model's FIM
    tokens, laid out as llama.cpp's server lays out an infill: [BOS] FIM_PRE prefix FIM_SUF suffix FIM_MID,
    the reply being the middle. The client's text is read as text (a `<|fim_prefix|>` in code stays words)."""
    if fim is None:
        raise bad_request(
            "this model has no fill-in-the-middle tokens (<|fim_prefix|>, <PRE>, <｜fim▁begin｜> ...), so it cannot "
            "fill a gap: send the prompt without 'suffix', or serve a code model trained for it",
            param="suffix",
            code="fim_not_supported",
        )
    if isinstance(prefix, list):
        _check_ids(prefix, n_vocab)
    pre, suf, mid = fim
    bos = tokenize("", True)  # the start of text the vocabulary puts first, if it puts one
    head = prefix if isinstance(prefix, list) else tokenize(prefix, False)
    tokens = [*bos, pre, *head, suf, *tokenize(suffix, False), mid]
    return Prepared(tokens, len(tokens))


def _check_ids(ids: list[int], n_vocab: int) -> None:
    bad = next((t for t in ids if not 0 <= t < n_vocab), None)
    if bad is not None:
        raise bad_request(f"token id {bad} is not in the model's vocabulary (0 to {n_vocab - 1:,})", param="prompt")


def _chat_message(m: Message, marker: str) -> ChatMessage:
    role = "user" if m.role == "tool" else m.role
    return ChatMessage(role, _with_markers(m, marker))


def _with_markers(m: Message, marker: str) -> str:
    """Each image as the projector's marker at the head of its message, as the chat places them."""
    return "".join(f"{marker}\n" for _ in m.images) + m.text if m.images and marker else m.text


def _wire(m: Message, marker: str) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": _with_markers(m, marker)}
    if m.tool_calls:
        # templates write `arguments | tojson`: they get the object, as llama.cpp's server gives it
        out["tool_calls"] = [
            {**call, "function": {**call["function"], "arguments": _parsed(call["function"]["arguments"])}}
            for call in m.tool_calls
        ]
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    if m.name:
        out["name"] = m.name
    return out


def _parsed(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _tool_json(tool: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def _media(images: list[Image], model: LoadedModel) -> tuple[Media, ...]:
    """Each image checked and scaled as the chat's are (app.attachments), from a private temporary file."""
    from app.attachments import MediaError, inspect, pixel_limit, prepare

    limit = pixel_limit(model.projector)
    out = []
    with tempfile.TemporaryDirectory(prefix="vramchat-serve-") as folder:
        for i, image in enumerate(images):
            path = Path(folder) / f"image-{i}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(image.data)
            try:
                attachment = inspect(path)
                if attachment.kind != "image":
                    raise MediaError(f"image {i + 1} is not a picture")
                media, _scaled = prepare(attachment, path, limit)
            except MediaError as exc:
                raise ApiError(
                    400, f"image {i + 1}: {str(exc).replace(str(path), 'the image')}", param="messages"
                ) from None
            out.append(media)
    return tuple(out)

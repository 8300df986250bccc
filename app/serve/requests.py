"""The JSON a client sends, checked field by field into typed requests: every value of the wrong kind or
out of range is refused with its field's name (OpenAI's `param`), never passed on. Fields this server
does not act on and that change nothing of the answer (`user`, `metadata`, `store` ...) are let be; those
that would change it and cannot be honoured (`n` above 1, `echo`, `best_of`) are refused in words.
A JSON `response_format` is read by app.serve.structured."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.conversation.sampling import ChatSampling, checked
from app.limits import INTEGERS
from app.serve.errors import bad_request
from app.serve.options import Limits
from app.serve.structured import JsonFormat, json_format

if TYPE_CHECKING:
    from app.conversation.templates import TemplateValue

ROLES = ("system", "developer", "user", "assistant", "tool")


@dataclass(frozen=True)
class Image:
    """An image part: the data URL's bytes (no URL is ever fetched)."""

    data: bytes
    mime: str


@dataclass(frozen=True)
class Message:
    role: str  # system (developer is read as system), user, assistant, tool
    text: str
    images: tuple[Image, ...] = ()
    tool_calls: tuple[dict[str, Any], ...] = ()  # an assistant's earlier calls, as the client sent them
    tool_call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Sampling:
    """The request's sampling: the values the chat has (ChatSampling), and OpenAI's penalties."""

    asked: ChatSampling
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    stop: tuple[str, ...] = ()
    max_tokens_given: bool = False
    # each token's log-probability and this many of the likeliest beside it (logprobs), -1: none
    top_logprobs: int = -1
    # OpenAI's logit_bias: (token id, bias), -inf for false (banned, as llama.cpp's server takes it); the ids are
    # checked against the model's vocabulary when the reply's parameters are made (app.serve.runner)
    logit_bias: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: tuple[Message, ...]
    sampling: Sampling
    stream: bool = False
    include_usage: bool = False
    tools: tuple[Tool, ...] = ()
    tool_choice: str = "auto"  # none, auto, required, or the name of the one function to call
    thinking: bool | None = None  # chat_template_kwargs.enable_thinking, as llama.cpp's server takes it
    # the chat template's other variables (chat_template_kwargs, as llama.cpp's server passes them on; OpenAI's
    # reasoning_effort as gpt-oss's template reads it)
    template_variables: tuple[tuple[str, TemplateValue], ...] = ()
    json_reply: JsonFormat | None = None  # the reply asked for in JSON (response_format), None: text


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    prompt: str | list[int]
    sampling: Sampling
    stream: bool = False
    include_usage: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    json_reply: JsonFormat | None = None
    suffix: str | None = None  # the text after the gap: the prompt is what comes before it (fill in the middle)


# -- small checks --------------------------------------------------------------------------------


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad_request(f"'{name}' must be a number", param=name)
    if not low <= value <= high:
        raise bad_request(f"'{name}' must be between {low:g} and {high:g} (got {value:g})", param=name)
    return float(value)


def _integer(body: dict[str, Any], name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"'{name}' must be a whole number", param=name)
    if not low <= value <= high:
        raise bad_request(f"'{name}' must be between {low:,} and {high:,} (got {value:,})", param=name)
    return value


def _boolean(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(f"'{name}' must be true or false", param=name)
    return value


def _string(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise bad_request(f"'{name}' must be a string", param=name)
    return value


def model_name(body: dict[str, Any]) -> str:
    value = body.get("model")
    if value is None:
        return ""  # llama.cpp's server takes a request without one; so does this one
    name = _string(value, "model")
    if len(name) > 512:
        raise bad_request("'model' is longer than any model's name", param="model")
    return name


def _sampling(body: dict[str, Any], limits: Limits, chat: bool = True) -> Sampling:
    def chat_value(name: str, key: str | None = None) -> Any:
        value = body.get(key or name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise bad_request(f"'{key or name}' must be a number", param=key or name)
        if name in INTEGERS and isinstance(value, float) and not value.is_integer():  # not rounded in silence
            raise bad_request(f"'{key or name}' must be a whole number", param=key or name)
        try:
            return checked(name, value)
        except ValueError as exc:
            raise bad_request(f"'{key or name}': {exc}", param=key or name) from None

    max_tokens = _integer(body, "max_completion_tokens", 1, 10_000_000)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 1, 10_000_000)
    seed = body.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool) and seed < 0:
        seed = None  # -1 and the like: a random seed, as llama.cpp's server reads it
    asked = ChatSampling(
        temperature=chat_value("temperature"),
        top_p=chat_value("top_p"),
        top_k=chat_value("top_k"),
        min_p=chat_value("min_p"),
        repeat_penalty=chat_value("repeat_penalty"),
        seed=None if seed is None else chat_value("seed"),
        max_tokens=max_tokens,
    )
    return Sampling(
        asked,
        presence_penalty=_number(body, "presence_penalty", -2.0, 2.0) or 0.0,
        frequency_penalty=_number(body, "frequency_penalty", -2.0, 2.0) or 0.0,
        stop=_stops(body.get("stop"), limits),
        max_tokens_given=max_tokens is not None,
        logit_bias=_logit_bias(body.get("logit_bias"), limits),
        top_logprobs=_top_logprobs(body) if chat else _completion_logprobs(body),
    )


MAX_TOP_LOGPROBS = 20  # as OpenAI's chat takes them


def _top_logprobs(body: dict[str, Any]) -> int:
    """A chat's `logprobs` (true: each token's) and `top_logprobs` (the likeliest beside it; with logprobs)."""
    wanted = _boolean(body, "logprobs")
    top = _integer(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if top is not None and top > 0 and not wanted:
        raise bad_request("'top_logprobs' needs 'logprobs': true", param="top_logprobs")
    return (top or 0) if wanted else -1


def _completion_logprobs(body: dict[str, Any]) -> int:
    """A completion's `logprobs`: how many of the likeliest tokens beside each one (0: its own alone)."""
    top = _integer(body, "logprobs", 0, MAX_TOP_LOGPROBS)
    return -1 if top is None else top


def _logit_bias(value: Any, limits: Limits) -> tuple[tuple[int, float], ...]:
    """{"TOKEN ID": bias} as OpenAI sends it ([[id, bias], ...] as llama.cpp's server also takes it): a bias
    from -100 to 100, or false to ban the token."""
    if value is None:
        return ()
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
        pairs = [(p[0], p[1]) for p in value]
    else:
        raise bad_request("'logit_bias' maps token ids to biases: {\"1234\": -100}", param="logit_bias")
    if len(pairs) > limits.logit_biases:
        raise bad_request(f"'logit_bias' may hold at most {limits.logit_biases:,} tokens", param="logit_bias")
    out: list[tuple[int, float]] = []
    for key, bias in pairs:
        if isinstance(key, int) and not isinstance(key, bool):
            token = key
        elif isinstance(key, str) and key.strip().isdigit() and len(key) < 12:
            token = int(key)
        else:
            raise bad_request(f"'logit_bias': {str(key)[:40]!r} is not a token id", param="logit_bias")
        if bias is False:
            out.append((token, -math.inf))
        elif isinstance(bias, bool) or not isinstance(bias, (int, float)) or not -100 <= bias <= 100:
            raise bad_request(
                f"'logit_bias': token {token}'s bias must be a number from -100 to 100, or false", param="logit_bias"
            )
        else:
            out.append((token, float(bias)))
    return tuple(out)


def _stops(value: Any, limits: Limits) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise bad_request("'stop' must be a string or a list of strings", param="stop")
    if len(stops) > limits.stops:
        raise bad_request(f"'stop' may hold at most {limits.stops} strings", param="stop")
    if any(len(s) > limits.stop_chars for s in stops):
        raise bad_request(f"a stop string may be at most {limits.stop_chars} characters long", param="stop")
    return tuple(s for s in stops if s)


def _refuse_unsupported(body: dict[str, Any]) -> None:
    n = body.get("n")
    if n not in (None, 1):
        raise bad_request("'n': this server writes one choice per request; send several requests", param="n")
    if body.get("best_of") not in (None, 1):
        raise bad_request("'best_of' is not offered by this server", param="best_of")
    if body.get("echo") not in (None, False):
        raise bad_request("'echo' is not offered by this server", param="echo")


def _stream_options(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise bad_request("'stream_options' must be an object", param="stream_options")
    return _boolean(options, "include_usage")


# -- chat ----------------------------------------------------------------------------------------


def chat_request(body: dict[str, Any], limits: Limits) -> ChatRequest:
    _refuse_unsupported(body)
    if body.get("suffix") not in (None, ""):
        raise bad_request("'suffix' (fill in the middle) is a completion's: send it to /v1/completions", param="suffix")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad_request("'messages' must be a non-empty list of messages", param="messages")
    if len(raw) > limits.messages:
        raise bad_request(f"'messages' may hold at most {limits.messages:,} messages", param="messages")
    budget = [limits.text_chars, limits.images]
    messages = tuple(_message(m, i, budget) for i, m in enumerate(raw))
    tools = _tools(body.get("tools"), limits)
    choice = _tool_choice(body.get("tool_choice"), tools)
    variables = _template_variables(body)
    thinking = next((v for k, v in variables if k == "enable_thinking" and isinstance(v, bool)), None)
    return ChatRequest(
        model_name(body),
        messages,
        _sampling(body, limits),
        stream=_boolean(body, "stream"),
        include_usage=_stream_options(body),
        tools=tools,
        tool_choice=choice,
        thinking=thinking,
        template_variables=tuple((k, v) for k, v in variables if k != "enable_thinking"),
        json_reply=json_format(body, limits.schema_chars),
    )


# the names the renderer gives a chat template itself: a client's variables never replace them
_RENDERER_NAMES = frozenset(("messages", "tools", "add_generation_prompt", "bos_token", "eos_token"))
_EFFORTS = ("minimal", "low", "medium", "high")
_VARIABLES = 16  # variables one request may set
_VALUE_CHARS = 1024  # a variable's text


def _template_variables(body: dict[str, Any]) -> list[tuple[str, TemplateValue]]:
    """chat_template_kwargs (names to text, numbers or true/false), and reasoning_effort as the variable of
    that name (gpt-oss's templates read it); a template that reads neither is rendered as it would be."""
    kwargs = body.get("chat_template_kwargs")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise bad_request("'chat_template_kwargs' must be an object", param="chat_template_kwargs")
    effort = body.get("reasoning_effort")
    if effort is not None:
        if effort not in _EFFORTS:
            raise bad_request(f"'reasoning_effort' is one of {', '.join(_EFFORTS)}", param="reasoning_effort")
        kwargs = {"reasoning_effort": effort, **kwargs}  # the template's own variable, where both are sent
    if len(kwargs) > _VARIABLES:
        raise bad_request(
            f"'chat_template_kwargs' may set at most {_VARIABLES} variables", param="chat_template_kwargs"
        )
    out: list[tuple[str, TemplateValue]] = []
    for name, value in kwargs.items():
        where = f"chat_template_kwargs.{str(name)[:64]}"
        if not name.isidentifier() or len(name) > 64 or name in _RENDERER_NAMES:
            raise bad_request(
                f"'chat_template_kwargs': {str(name)[:64]!r} is not a variable a template may be given", param=where
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise bad_request(f"'{where}' must be a finite number", param=where)
        if isinstance(value, str) and len(value) > _VALUE_CHARS:
            raise bad_request(f"'{where}' may be at most {_VALUE_CHARS:,} characters", param=where)
        if not isinstance(value, (bool, str, int, float)):
            raise bad_request(f"'{where}' must be text, a number, true or false", param=where)
        if name == "enable_thinking" and not isinstance(value, bool):
            raise bad_request(f"'{where}' must be true or false", param=where)
        out.append((name, value))
    return out


def _message(raw: Any, index: int, budget: list[int]) -> Message:
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise bad_request(f"{where} must be an object with a role and content", param=where)
    role = raw.get("role")
    if role not in ROLES:
        raise bad_request(f"{where}.role must be one of {', '.join(ROLES)}", param=f"{where}.role")
    text, images = _content(raw.get("content"), where, budget)
    calls: tuple[dict[str, Any], ...] = ()
    if role == "assistant" and raw.get("tool_calls") is not None:
        calls = _earlier_calls(raw["tool_calls"], where)
    elif role not in ("assistant", "tool") and raw.get("content") is None:
        raise bad_request(f"{where}.content is missing", param=f"{where}.content")
    tool_call_id = raw.get("tool_call_id") or ""
    name = raw.get("name") or ""
    if not isinstance(tool_call_id, str) or not isinstance(name, str):
        raise bad_request(f"{where}: 'tool_call_id' and 'name' must be strings", param=where)
    return Message("system" if role == "developer" else role, text, images, calls, tool_call_id[:256], name[:256])


def _content(value: Any, where: str, budget: list[int]) -> tuple[str, tuple[Image, ...]]:
    if value is None:
        return "", ()
    if isinstance(value, str):
        return _spend(value, where, budget), ()
    if not isinstance(value, list):
        raise bad_request(f"{where}.content must be a string or a list of parts", param=f"{where}.content")
    texts: list[str] = []
    images: list[Image] = []
    for j, part in enumerate(value):
        at = f"{where}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(_spend(_string(part.get("text"), f"{at}.text"), at, budget))
        elif kind == "image_url":
            budget[1] -= 1
            if budget[1] < 0:
                raise bad_request("this request has more images than the server takes in one request", param=at)
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            images.append(_data_url(_string(url, f"{at}.image_url.url"), at))
        else:
            raise bad_request(f"{at}: a part is text or image_url", param=at)
    return "\n".join(texts), tuple(images)


def _spend(text: str, where: str, budget: list[int]) -> str:
    budget[0] -= len(text)
    if budget[0] < 0:
        raise bad_request("the request's text is longer than this server takes in one request", param=where)
    return text


def _data_url(url: str, where: str) -> Image:
    import base64
    import binascii

    if not url.startswith("data:"):
        raise bad_request(
            f"{where}: images are sent as data URLs (data:image/png;base64,...); this server fetches no URL",
            param=where,
        )
    head, _, payload = url[5:].partition(",")
    mime, _, encoding = head.partition(";")
    if encoding != "base64" or not mime.startswith("image/"):
        raise bad_request(f"{where}: an image data URL is data:image/TYPE;base64,...", param=where)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"{where}: the image's base64 is damaged", param=where) from None
    return Image(data, mime)


def _earlier_calls(value: Any, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list):
        raise bad_request(f"{where}.tool_calls must be a list", param=f"{where}.tool_calls")
    out = []
    for k, call in enumerate(value):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad_request(f"{where}.tool_calls[{k}] needs a function with a name", param=f"{where}.tool_calls")
        arguments = function.get("arguments", "{}")
        out.append(
            {
                "id": str(call.get("id") or f"call_{k}"),
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
    return tuple(out)


# -- tools ---------------------------------------------------------------------------------------


def _tools(value: Any, limits: Limits) -> tuple[Tool, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request("'tools' must be a list", param="tools")
    if len(value) > limits.tools:
        raise bad_request(f"'tools' may hold at most {limits.tools} tools", param="tools")
    out = []
    for i, raw in enumerate(value):
        function = raw.get("function") if isinstance(raw, dict) and raw.get("type") == "function" else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name or len(name) > 64 or not name.replace("-", "_").isidentifier():
            raise bad_request(
                f'tools[{i}] must be {{"type": "function", "function": {{"name": ...}}}} with a name of '
                "letters, digits, _ and - (at most 64)",
                param=f"tools[{i}]",
            )
        assert isinstance(function, dict)
        description = function.get("description") or ""
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(description, str) or not isinstance(parameters, dict):
            raise bad_request(f"tools[{i}]: a description is text and parameters a JSON schema", param=f"tools[{i}]")
        out.append(Tool(name, description, parameters))
    return tuple(out)


def _tool_choice(value: Any, tools: tuple[Tool, ...]) -> str:
    if value is None:
        return "auto" if tools else "none"
    if value in ("none", "auto", "required"):
        if value != "none" and not tools:
            raise bad_request(f"'tool_choice' is {value!r} but no tools were given", param="tool_choice")
        return str(value)
    function = value.get("function") if isinstance(value, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise bad_request(
            '\'tool_choice\' is none, auto, required or {"type": "function", "function": {"name": ...}}',
            param="tool_choice",
        )
    if name not in {t.name for t in tools}:
        raise bad_request(f"'tool_choice' names {name!r}, which is not among the tools", param="tool_choice")
    return "function:" + name


# -- completions ---------------------------------------------------------------------------------


def completion_request(body: dict[str, Any], limits: Limits) -> CompletionRequest:
    _refuse_unsupported(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        _spend(prompt, "prompt", [limits.text_chars, 0])
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        if len(prompt) > limits.text_chars // 4:
            raise bad_request("'prompt' has more tokens than this server takes in one request", param="prompt")
    else:
        raise bad_request("'prompt' must be a string (or a list of token ids); one prompt per request", param="prompt")
    suffix = body.get("suffix")
    if suffix is not None:
        left = limits.text_chars - (len(prompt) if isinstance(prompt, str) else 0)  # the prompt's and the suffix's
        _spend(_string(suffix, "suffix"), "suffix", [left, 0])
    return CompletionRequest(
        model_name(body),
        prompt,
        _sampling(body, limits, chat=False),
        stream=_boolean(body, "stream"),
        include_usage=_stream_options(body),
        json_reply=json_format(body, limits.schema_chars),
        suffix=suffix,
    )

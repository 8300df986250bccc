"""From a conversation to a prompt: the messages as the chat format sees them, rendered and tokenized.

`build_prompt` renders the conversation in the model's chat format and, when it would not leave room
for the reply in the context, drops the oldest turns (the system prompt stays); `conversation_tokens`
counts what the conversation takes as it stands (`chat_tokens`: a stored chat, with the model loaded
now). The reply itself is run by `app.conversation.reply.write_reply`. Nothing here touches Textual.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.conversation.reasoning import answer_of, template_switches
from app.conversation.templates import ChatFormat, ChatMessage, fallback_note, render
from app.engine.types import Media, MediaPrompt
from app.errors import VramchatError
from app.store import Conversation, StoredMessage

if TYPE_CHECKING:
    from app.session import ModelSession

NEAR_LIMIT = 0.85  # warn when prompt + reply room passes this share of the context


class ChatError(VramchatError, RuntimeError):
    """A message cannot be sent as it is (the text says why, in a user's words)."""

    title = "The message cannot be sent"


@dataclass(frozen=True)
class PromptBuild:
    text: str
    tokens: list[int]
    n_ctx: int
    reply_room: int  # tokens kept free for the reply
    dropped: int  # oldest messages left out to fit
    kept: int  # conversation messages in the prompt (the system prompt not counted)
    media: tuple[str, ...] = ()  # the images in the prompt, in order: one media marker each in `text`
    note: str = ""  # one line when the model's template was stopped and its family's format used

    @property
    def near_limit(self) -> bool:
        return len(self.tokens) + self.reply_room > NEAR_LIMIT * self.n_ctx

    @property
    def used_share(self) -> float:
        return len(self.tokens) / self.n_ctx if self.n_ctx else 0.0


def to_messages(stored: Sequence[StoredMessage]) -> list[ChatMessage]:
    """The conversation as the chat format sees it: empty replies (a stop before the first
    token) are left out; partial replies stay, as the user saw them; images go with their message.
    A reply's reasoning stays out (app/conversation/reasoning.py): only its answer, as reasoning models' templates
    render earlier turns (a reply that only thought is an empty turn)."""
    return [
        ChatMessage(
            m.role, answer_of(m.content) if m.role == "assistant" else m.content, tuple(a.id for a in m.attachments)
        )
        for m in stored
        if m.role in ("user", "assistant") and (m.content.strip() or m.attachments)
    ]


MediaTokenizer = Callable[[str, tuple[str, ...]], list[int]]  # (prompt text, images by id) -> cells


def with_markers(turns: Sequence[ChatMessage], marker: str) -> list[ChatMessage]:
    """Each image as the projector's marker at the head of its message (as llama-server places an image
    part before the text), where the model's template then puts the message. Without a projector
    (`marker` empty) images stay out of the prompt: the model reads the words alone."""
    out = []
    for m in turns:
        content = m.content
        if m.media and marker:
            content = "".join(f"{marker}\n" for _ in m.media) + content
        out.append(ChatMessage(m.role, content))
    return out


def _rendered(
    fmt: ChatFormat,
    head: list[ChatMessage],
    turns: Sequence[ChatMessage],
    eos: str,
    tokenize: Callable[[str], list[int]],
    marker: str,
    tokenize_media: MediaTokenizer | None,
    switches: dict[str, bool] | None = None,
) -> tuple[str, list[int], tuple[str, ...]]:
    text = render(fmt, head + with_markers(turns, marker), bos="", eos=eos, switches=switches)
    media = tuple(i for m in turns for i in m.media) if marker and tokenize_media is not None else ()
    return text, (tokenize_media(text, media) if media and tokenize_media else tokenize(text)), media


def reply_room(n_ctx: int, max_tokens: int) -> int:
    return max(1, min(max_tokens, n_ctx // 2))


def build_prompt(
    fmt: ChatFormat,
    system: str,
    turns: list[ChatMessage],
    n_ctx: int,
    max_tokens: int,
    tokenize: Callable[[str], list[int]],
    eos: str = "",
    marker: str = "",
    tokenize_media: MediaTokenizer | None = None,
    switches: dict[str, bool] | None = None,
) -> PromptBuild:
    """Render `turns` (oldest first, ending with the user's message) to fit `n_ctx` with room
    for `max_tokens`; drop whole turns from the front while it does not fit. With a projector
    (`marker`, `tokenize_media`), each image counts as the tokens the projector makes of it.
    `switches` are the template's variables the chat sets (`enable_thinking`)."""
    if not turns or turns[-1].role != "user":
        raise ChatError("there is no question to answer")
    room = reply_room(n_ctx, max_tokens)
    budget = n_ctx - room
    head = [ChatMessage("system", system)] if system.strip() else []
    starts = [i for i, m in enumerate(turns) if m.role == "user"]  # where a turn may begin
    for start in starts:
        # BOS comes from the tokenizer (add_special), not the template, so it is never doubled
        text, tokens, media = _rendered(fmt, head, turns[start:], eos, tokenize, marker, tokenize_media, switches)
        if len(tokens) <= budget:
            return PromptBuild(text, tokens, n_ctx, room, start, len(turns) - start, media, fallback_note(fmt))
    _, last_tokens, last_media = _rendered(fmt, head, turns[-1:], eos, tokenize, marker, tokenize_media, switches)
    last = len(last_tokens)
    what = "your message and the system prompt take" if head else "your message takes"
    if last_media:
        what = what.replace("your message", "your message with its images")
    raise ChatError(
        f"{what} {last:,} tokens; with {room:,} kept for the reply the context of "
        f"{n_ctx:,} tokens cannot hold it. Shorten it, lower max tokens, or load with a longer context."
    )


def conversation_tokens(
    fmt: ChatFormat,
    system: str,
    turns: list[ChatMessage],
    tokenize: Callable[[str], list[int]],
    eos: str = "",
    marker: str = "",
    tokenize_media: MediaTokenizer | None = None,
    switches: dict[str, bool] | None = None,
) -> int:
    """How many tokens of context the conversation takes as it stands (what the status line counts)."""
    head = [ChatMessage("system", system)] if system.strip() else []
    if not turns:
        return 0
    return len(_rendered(fmt, head, turns, eos, tokenize, marker, tokenize_media, switches)[1])


def chat_tokens(session: ModelSession, chat: Conversation, media: Callable[[str], Media] | None, thinking: bool) -> int:
    """What the stored chat takes of the context with the model loaded now (the status line's count): its
    messages in the model's format, tokenized by the engine; with `media` (a picture's pixels by its id),
    each picture as the tokens the projector makes of it. `thinking`: the chat's switch."""
    model, engine = session.model, session.engine
    assert model is not None, "counted only with a model loaded"

    def tokenize_media(text: str, ids: tuple[str, ...]) -> list[int]:
        assert media is not None
        return engine.tokenize_media(MediaPrompt(text, tuple(media(i) for i in ids)))

    return conversation_tokens(
        model.fmt,
        chat.system_prompt,
        to_messages(chat.messages),
        engine.tokenize,
        model.eos,
        model.marker if media is not None else "",
        tokenize_media,
        template_switches(model.fmt.template, thinking),
    )

"""The words under a message: how the reading of a long prompt goes, a finished reply's note, why a
reply ended before its first word, and a stored message's note when a past chat is opened; and the hint
an empty chat shows in their place."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.conversation.outcome import ENGINE_CRASH, stop_note

if TYPE_CHECKING:
    from app.engine import GenerationStats
    from app.engine.types import PromptProgress
    from app.session import LoadedModel
    from app.store import StoredMessage

PROMPT_PROGRESS_FROM = 256  # tokens: shorter prompts are read too fast for progress to help


def prompt_note(progress: PromptProgress) -> str | None:
    """While the prompt is read, nothing is written yet: the picture going through the projector, or
    the tokens read (of a long prompt) and how fast. None: nothing worth saying."""
    if progress.picture is not None:
        index, count = progress.picture
        return f"showing the model the picture{f' {index + 1} of {count}' if count > 1 else ''}…"
    if progress.total < PROMPT_PROGRESS_FROM:
        return None
    rate = f" · {progress.tokens_per_second:,.0f} tok/s" if progress.read else ""
    return f"reading the prompt: {progress.read:,} of {progress.total:,} tokens{rate}"


def reply_note(stats: GenerationStats, error: str = "") -> str:
    if error:
        return "failed"
    parts = []
    if stats.generated_tokens:
        parts.append(f"{stats.generated_tokens} tokens · {stats.tokens_per_second:.1f} tok/s")
    note = stop_note(stats.stopped_by)
    if note:
        parts.append(note)
    return " · ".join(parts)


def empty_reply_words(stats: GenerationStats) -> tuple[str, str]:
    """(title, text) for a reply that ended before its first word: why, in the user's terms."""
    if stats.stopped_by == "user":
        return "Stopped", "Stopped before the model wrote anything."
    if stats.stopped_by == "context":
        return "No room to reply", (
            f"The prompt ({stats.prompt_tokens:,} tokens) filled the context: nothing was left for a reply. "
            "Start a new chat (Ctrl+N), or load the model with a longer context."
        )
    if stats.stopped_by == "length":
        return "No reply", "The reply's token limit is 0: raise max tokens in the chat settings (F4)."
    return "No reply", (
        f"The model ended its reply at once, without a word (it wrote its end-of-text token first; the prompt "
        f"was {stats.prompt_tokens:,} tokens). Ask again in other words, or press Ctrl+R to retry."
    )


def stored_note(m: StoredMessage) -> str:
    if m.state == "partial":
        if m.stopped_by in ("crash", ENGINE_CRASH):
            return stop_note(m.stopped_by) if m.stopped_by == ENGINE_CRASH else "cut short: the app stopped"
        return "stopped"
    if m.tokens:
        return f"{m.tokens} tokens · {m.tokens_per_second:.1f} tok/s"
    return ""


def hint_words(model: LoadedModel | None, loading: bool) -> str:
    """What an empty chat says: how to talk to the model loaded (none yet: that it is loading, or is not)."""
    if model is None:
        return "No model loaded yet." if not loading else "Loading the model…"
    if model.fmt.kind == "transcript":
        return (
            f"{model.name} is a base model without a chat template, so vramchat talks to it as a plain "
            "Q/A transcript. Short factual questions work best, for example: What is the capital of France?"
        )
    return f"Ask {model.name} anything. ({model.fmt.description})"

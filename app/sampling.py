"""How a reply is sampled when the user has not said: by the model's kind.

A base model without a chat template (the demo, Gemma 3 270M) is talked to as a plain Q/A
transcript (app.engine.templates.transcript). Sampled, even at 0.2, it wanders: asked the README's
own question, "What is the capital of France?", the demo answered "France is the capital of
France." and "10,000,000,000." in some runs, and "Paris" every time greedily. So the transcript
format decodes greedily unless the user set a temperature; chat-template models keep a low one.
"""

from __future__ import annotations

from app.engine.templates import ChatFormat

TRANSCRIPT_TEMPERATURE = 0.0  # greedy: a base model's most likely continuation is its best answer
CHAT_TEMPERATURE = 0.2  # low: small models wander at higher temperatures


def temperature_for(chosen: float | None, fmt: ChatFormat) -> float:
    """The temperature a reply is sampled at: the user's, else the model kind's default."""
    if chosen is not None:
        return chosen
    return TRANSCRIPT_TEMPERATURE if fmt.kind == "transcript" else CHAT_TEMPERATURE


def describe_temperature(chosen: float | None, fmt: ChatFormat) -> str:
    """For the status line: "temp 0.7", or the default and why ("greedy (base model)")."""
    value = temperature_for(chosen, fmt)
    if chosen is not None:
        return f"temp {value:g}"
    return "greedy (base model)" if value == 0 else f"temp {value:g} (default)"

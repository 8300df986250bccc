"""One vocabulary for memory: each word has one meaning wherever a figure is shown (the dashboard's
plots, the memory map, the runway, the per-buffer table, the plan receipt, F1's glossary).

A figure is this model's (planned, allocated, committed, in use of the KV cache) or a device's as a
whole (in use, other programs); a label never puts the two under one word, and a line that adds them
says so ("other programs + planned").
"""

from __future__ import annotations

PLANNED = "planned"
ALLOCATED = "allocated"
COMMITTED = "committed"
IN_USE = "in use"
OTHER_PROGRAMS = "other programs"
RESERVED = "reserved for growth"
PLANNED_MAX = "planned max"

# word -> its one meaning, in a user's words (F1's glossary lists them in this order)
MEANING: dict[str, str] = {
    PLANNED: "what the plan puts on a device for this model (its buffers and the runtime's own memory), "
    "from the file's header before the load; never other programs' memory",
    ALLOCATED: "what llama.cpp says it allocated for this model (its log)",
    COMMITTED: "the KV cache allocated for the context held now, filled or not (the context grows in steps)",
    IN_USE: "memory holding data now: of the KV cache, the part the conversation fills; of a device, "
    "every program's memory on it, as the driver (or the system, for host RAM) reads it",
    OTHER_PROGRAMS: "a device's memory that is not this model's: in use before the load (the system's too); "
    '"others" for short where a plot is narrow',
    RESERVED: "kept free, not allocated: the room the plan counts on for the context to grow",
    PLANNED_MAX: "the KV cache at the largest context the plan reserved room for",
}

# a device's plot compares with the load: other programs' memory then, and with this model's planned on top
# (what in use would be if the plan were exact and the other programs held what they held then)
OTHERS_AT_LOAD = f"{OTHER_PROGRAMS} at load"
OTHERS_AND_PLANNED = f"{PLANNED} + {OTHER_PROGRAMS}"  # this model's plan on top of the others at load
# where a plot is narrow (the full dashboard's columns): "others" is short for other programs
OTHERS_AT_LOAD_SHORT = "others at load"
OTHERS_AND_PLANNED_SHORT = f"{PLANNED} + others"


def glossary() -> str:
    """The words as Markdown bullets (F1)."""
    return "\n".join(f"- **{word[0].upper() + word[1:]}**: {meaning}." for word, meaning in MEANING.items())

"""A generated token's log-probability, and the likeliest tokens beside it, from the logits it was drawn from.

As llama.cpp's server reports them (`n_probs`): the model's own distribution, a softmax over the raw logits of
every token in the vocabulary, before the sampler's temperature, top-k or grammar. Read right after the token
is drawn, while the logits are still the step's (the next decode overwrites them)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from app.engine.types import TokenLogprob


def token_logprob(
    ctx: Any, index: int, n_vocab: int, token: int, top: int, piece: Callable[[int], bytes]
) -> TokenLogprob:
    """`token`'s entry from the logits of output `index` (-1: the last); `top` alternatives, likeliest first."""
    import llama_cpp
    import numpy as np

    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, index), shape=(n_vocab,))
    peak = float(logits.max())
    total = peak + math.log(float(np.exp(logits - peak).sum(dtype=np.float64)))
    alternatives = tuple((piece(int(t)), float(logits[t]) - total) for t in _likeliest(logits, top)) if top else ()
    return piece(token), float(logits[token]) - total, alternatives


def _likeliest(logits: Any, k: int) -> Any:
    """The `k` likeliest token ids, likeliest first (ties by id). Sorting a 262,144-entry vocabulary takes
    milliseconds a token; the k-th largest of every 64th logit is a floor the k largest all stand above, and
    only the few above it are sorted."""
    import numpy as np

    sample = logits[::64]
    if k >= sample.size:
        return np.argsort(-logits, kind="stable")[:k]
    floor = np.partition(sample, -k)[-k]
    above = np.flatnonzero(logits >= floor)
    return above[np.lexsort((above, -logits[above]))][:k]


def held_back(entries: list[TokenLogprob], chars: int) -> int:
    """How many of the last tokens have their text wholly in the reply's last `chars` characters (text held
    back while it may still become a stop string, or cut off by one)."""
    n = 0
    for text, _, _ in reversed(entries):
        length = len(text.decode("utf-8", errors="replace"))
        if length > chars:
            break
        chars -= length
        n += 1
    return n


def drop_cut(entries: list[TokenLogprob], cut_chars: int) -> None:
    """Forget the last tokens whose text a stop string cut off (the reply's last `cut_chars` characters): the
    client never sees their text."""
    del entries[len(entries) - held_back(entries, cut_chars) :]

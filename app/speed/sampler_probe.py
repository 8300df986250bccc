"""What the engine's sampler chain costs a token on this CPU, per vocabulary entry.

The chain runs once a token, on one thread, over every entry of the vocabulary: llama_sampler_sample
copies the logits into (id, logit, p) entries, then the penalties, top-k, top-p, min-p, temperature
and the draw run over them. A 262,144-entry vocabulary costs 1.0 ms a token on a 2-core EPYC, and more
on a slower core: a figure this machine times rather than one a table assumes.
"""

from __future__ import annotations

import ctypes
import statistics
import time

SAMPLED_VOCAB = 262_144  # a large vocabulary (Gemma 3's): past a few thousand entries the cost is per entry
ROUNDS = 31
HISTORY = 64  # tokens the penalties look back over (GenerationParams.repeat_last_n)


def sampler_entry_seconds() -> float:
    """Seconds a token's sampling takes per vocabulary entry with the engine's default chain (the median
    of ROUNDS: one thread, rarely disturbed, and every token pays the typical cost, not the best)."""
    import llama_cpp
    import numpy as np

    from app.engine.sampler_chain import sampler_chain
    from app.engine.types import GenerationParams

    rng = np.random.default_rng(0)
    entry = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])  # llama_token_data
    logits = rng.normal(0.0, 3.0, SAMPLED_VOCAB).astype(np.float32)
    ids = np.arange(SAMPLED_VOCAB, dtype=np.int32)
    entries = np.zeros(SAMPLED_VOCAB, entry)
    array = llama_cpp.llama_token_data_array(
        data=entries.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
        size=SAMPLED_VOCAB,
        selected=-1,
        sorted=False,
    )
    chain = sampler_chain(GenerationParams(seed=1), SAMPLED_VOCAB)
    try:
        for token in rng.integers(0, SAMPLED_VOCAB, HISTORY):
            llama_cpp.llama_sampler_accept(chain, int(token))
        times = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            entries["id"], entries["logit"], entries["p"] = ids, logits, 0.0  # llama_sampler_sample's copy
            array.size, array.selected, array.sorted = SAMPLED_VOCAB, -1, False
            llama_cpp.llama_sampler_apply(chain, ctypes.byref(array))
            llama_cpp.llama_sampler_accept(chain, int(entries["id"][array.selected]))
            times.append(time.perf_counter() - start)
        return statistics.median(times) / SAMPLED_VOCAB
    finally:
        llama_cpp.llama_sampler_free(chain)

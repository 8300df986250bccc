"""The engine's sampler chain, built once here for the engine and for the speed probe that times it."""

from __future__ import annotations

import time
from typing import Any

from app.engine.types import EngineError, GenerationParams


def sampler_chain(params: GenerationParams, n_vocab: int, vocab: Any = None) -> Any:
    """A llama.cpp sampler chain for these parameters (the caller frees it with llama_sampler_free):
    the grammar (when one is given: `vocab` is the model's), repetition, frequency and presence penalties,
    then greedy, or top-k, top-p, min-p, temperature and a seeded draw."""
    import llama_cpp

    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    if params.grammar:
        if vocab is None:
            raise EngineError("a grammar needs the model's vocabulary")
        grammar = llama_cpp.llama_sampler_init_grammar(vocab, params.grammar.encode("utf-8"), b"root")
        if not grammar:
            llama_cpp.llama_sampler_free(chain)
            raise EngineError("llama.cpp refused the reply's grammar")
        llama_cpp.llama_sampler_chain_add(chain, grammar)
    penalties = (params.repeat_penalty, params.frequency_penalty, params.presence_penalty)
    if penalties != (1.0, 0.0, 0.0):
        llama_cpp.llama_sampler_chain_add(
            chain,
            llama_cpp.llama_sampler_init_penalties(n_vocab, params.repeat_last_n, *penalties),
        )
    if params.temperature <= 0:
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        return chain
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_k(params.top_k))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_p(params.top_p, 1))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_min_p(params.min_p, 1))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(params.temperature))
    seed = params.seed if params.seed >= 0 else int(time.time_ns() & 0xFFFFFFFF)
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(seed))
    return chain

"""The engine's sampler chain, built once here for the engine and for the speed probe that times it."""

from __future__ import annotations

import time
from typing import Any

from app.engine.types import GenerationParams


def sampler_chain(params: GenerationParams, n_vocab: int) -> Any:
    """A llama.cpp sampler chain for these parameters (the caller frees it with llama_sampler_free):
    repetition penalties, then greedy, or top-k, top-p, min-p, temperature and a seeded draw."""
    import llama_cpp

    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    if params.repeat_penalty != 1.0:
        llama_cpp.llama_sampler_chain_add(
            chain,
            llama_cpp.llama_sampler_init_penalties(n_vocab, params.repeat_last_n, params.repeat_penalty, 0.0, 0.0),
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

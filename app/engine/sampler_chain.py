"""The engine's sampler chain, built once here for the engine and for the speed probe that times it, and a
reply's sampler over it (the grammar checked after the draw where that is the same draw)."""

from __future__ import annotations

import ctypes
import math
import time
from typing import Any

from app.engine.types import EngineError, GenerationParams


def sampler_chain(params: GenerationParams, n_vocab: int) -> Any:
    """A llama.cpp sampler chain for these parameters (the caller frees it with llama_sampler_free):
    the logit biases, repetition, frequency and presence penalties, then greedy, or top-k, top-p, min-p,
    temperature and a seeded draw. A reply's grammar is kept beside it (ReplySampler)."""
    import llama_cpp

    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    if params.logit_bias:
        biases = (llama_cpp.llama_logit_bias * len(params.logit_bias))(
            *(llama_cpp.llama_logit_bias(token, bias) for token, bias in params.logit_bias)
        )
        llama_cpp.llama_sampler_chain_add(
            chain, llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(params.logit_bias), biases)
        )
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


class ReplySampler:
    """One reply's sampler: `sample` draws its next token (and takes it in), `free` releases it.

    A reply under a grammar (a JSON reply, a forced tool call) is sampled as llama.cpp's server samples it:
    the chain draws from every token, and the grammar checks only the token drawn; only a token the grammar
    refuses sends the draw back, the grammar first over the whole vocabulary. Masking all of a 262,144-token
    vocabulary each token costs more than the model's own step (bench/json_reply.py: the demo writes 17 tokens/s
    so, 63 drawn first, 69 without a grammar). A greedy reply is the same either way; a sampled one draws
    again only where the grammar refused its first draw."""

    def __init__(self, params: GenerationParams, n_vocab: int, vocab: Any = None) -> None:
        import llama_cpp

        self._llama = llama_cpp
        self.chain = sampler_chain(params, n_vocab)
        self._grammar: Any = None
        if not params.grammar:
            return
        if vocab is None:
            self.free()
            raise EngineError("a grammar needs the model's vocabulary")
        self._grammar = llama_cpp.llama_sampler_init_grammar(vocab, params.grammar.encode("utf-8"), b"root")
        if not self._grammar:
            self.free()
            raise EngineError("llama.cpp refused the reply's grammar")
        import numpy as np

        self._n_vocab = n_vocab
        self._ids = np.arange(n_vocab, dtype=np.int32)
        entry = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])  # llama_token_data
        self._entries = np.zeros(n_vocab, entry)
        data = self._entries.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data))
        self._candidates = llama_cpp.llama_token_data_array(data, n_vocab, -1, False)
        self._one = (llama_cpp.llama_token_data * 1)()
        self._single = llama_cpp.llama_token_data_array(self._one, 1, -1, False)

    def sample(self, ctx: Any, index: int) -> int:
        """The token drawn from the logits of output `index` (-1: the last), taken into the sampler."""
        llama = self._llama
        if self._grammar is None:
            return int(llama.llama_sampler_sample(self.chain, ctx, index))
        token = self._drawn(ctx, index, with_grammar=False)
        if not self._allows(token):
            token = self._drawn(ctx, index, with_grammar=True)
        llama.llama_sampler_accept(self._grammar, token)
        llama.llama_sampler_accept(self.chain, token)
        return token

    def _drawn(self, ctx: Any, index: int, with_grammar: bool) -> int:
        import numpy as np

        llama = self._llama
        logits = np.ctypeslib.as_array(llama.llama_get_logits_ith(ctx, index), shape=(self._n_vocab,))
        self._entries["id"], self._entries["logit"], self._entries["p"] = self._ids, logits, 0.0
        candidates = self._candidates
        candidates.size, candidates.selected, candidates.sorted = self._n_vocab, -1, False  # samplers work in place
        if with_grammar:
            llama.llama_sampler_apply(self._grammar, ctypes.byref(candidates))
        llama.llama_sampler_apply(self.chain, ctypes.byref(candidates))
        return int(self._entries["id"][candidates.selected])

    def _allows(self, token: int) -> bool:
        self._one[0] = self._llama.llama_token_data(token, 0.0, 0.0)
        self._single.size, self._single.selected, self._single.sorted = 1, -1, False
        self._llama.llama_sampler_apply(self._grammar, ctypes.byref(self._single))
        return not math.isinf(self._one[0].logit)

    def free(self) -> None:
        for sampler in (self.chain, self._grammar):
            if sampler:
                self._llama.llama_sampler_free(sampler)
        self.chain = self._grammar = None

"""Whether llama.cpp's own grammar sampler lets a model write a text: a model's vocabulary (loaded alone, no
weights), the text tokenized, and each token offered to the grammar before it is accepted (llama.cpp aborts on
a token its grammar refuses, so none is accepted unchecked). What a grammar allows is then tested as llama.cpp
reads it, not as a test would guess it."""

from __future__ import annotations

import ctypes
import math
from pathlib import Path


class Vocabulary:
    def __init__(self, model: Path) -> None:
        import llama_cpp

        self._llama = llama_cpp
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self._model = llama_cpp.llama_model_load_from_file(str(model).encode(), params)
        if not self._model:
            raise RuntimeError(f"llama.cpp could not read the vocabulary of {model}")
        self.vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.eos = llama_cpp.llama_vocab_eos(self.vocab)

    def close(self) -> None:
        if self._model:
            self._llama.llama_model_free(self._model)
            self._model = None

    def tokens(self, text: str) -> list[int]:
        data = text.encode()
        room = len(data) + 8
        out = (self._llama.llama_token * room)()
        n = self._llama.llama_tokenize(self.vocab, data, len(data), out, room, False, False)
        assert n >= 0, f"{text!r} needs more than {room} tokens"
        ids = list(out[:n])
        assert self.text_of(ids) == text, "the tokens must spell the text exactly"
        return ids

    def text_of(self, ids: list[int]) -> str:
        pieces = []
        for token in ids:
            buf = ctypes.create_string_buffer(256)
            n = self._llama.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, True)
            pieces.append(buf.raw[:n])
        return b"".join(pieces).decode()

    def allows(self, grammar: str, text: str, finished: bool = True) -> bool:
        """Whether `grammar` lets a reply be `text` (and, `finished`, end there: the end of text allowed next)."""
        llama = self._llama
        sampler = llama.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        if not sampler:
            raise ValueError("llama.cpp refused the grammar")
        try:
            for token in self.tokens(text):
                if not self._offered(sampler, token):
                    return False
                llama.llama_sampler_accept(sampler, token)
            return self._offered(sampler, self.eos) if finished else True
        finally:
            llama.llama_sampler_free(sampler)

    def _offered(self, sampler: object, token: int) -> bool:
        llama = self._llama
        data = (llama.llama_token_data * 1)(llama.llama_token_data(token, 0.0, 0.0))
        candidates = llama.llama_token_data_array(data, 1, -1, False)
        llama.llama_sampler_apply(sampler, ctypes.byref(candidates))
        return not math.isinf(data[0].logit)

"""Parallel sequences in one context: several replies decoded together, one token of each per batch.

A context loaded with n_seq_max = N (the plan's parallel sequences, each with its own n_ctx / N cells of
KV cache, as the planner priced them) holds N conversations side by side. `Slots` gives each request a
sequence: the free one whose cached tokens share the longest start with its prompt, so a client that
sends its conversation again reads only what is new. It reads the prompts in the batch's spare room
and decodes the next token of every running reply in the same llama_decode, as llama.cpp's server
does: a batch of N tokens reads the weights once, so N clients cost little more than one.

It lives in the engine process, driven by the main thread between requests (app/engine/child.py);
`cancel` is safe from the reader thread. Each step returns the messages for the app
(app/engine/protocol.py: SLOT_PREFILLED, SLOT_PIECE, SLOT_DONE, SLOT_ERROR).
"""

from __future__ import annotations

import codecs
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.engine import protocol as p
from app.engine.logprobs import drop_cut, held_back, token_logprob
from app.engine.markers import first_stop, partial_marker
from app.engine.sampler_chain import ReplySampler
from app.engine.types import EngineError, GenerationParams, GenerationStats

PIECE_INTERVAL = 0.05  # seconds between a reply's pieces (the first goes at once), as the one-reply path


@dataclass
class _Reply:
    """One request being answered in a slot."""

    request: int
    params: GenerationParams
    sampler: ReplySampler
    left: list[int]  # prompt tokens still to read
    stats: GenerationStats
    decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace"))
    pending: str = ""  # text that may still turn into a stop string
    outbox: str = ""  # text to send
    sent_at: float = 0.0
    logprobs_sent: int = 0  # the tokens' log-probabilities sent so far
    next_token: int | None = None  # sampled, decoded at the next step


@dataclass
class _Slot:
    seq: int
    tokens: list[int] = field(default_factory=list)  # what the cache holds for this sequence, from position 0
    reply: _Reply | None = None
    used: float = 0.0  # when it last took a request (the least recently used goes first among equals)


@dataclass(frozen=True)
class SlotContext:
    """What `Slots` needs of the loaded engine (app.engine.engine.Engine.slot_context)."""

    ctx: Any
    vocab: Any
    n_vocab: int
    n_batch: int
    n_seq: int
    n_ctx_seq: int
    piece: Callable[[int], bytes]  # a token's text


class Slots:
    def __init__(self, context: SlotContext) -> None:
        import llama_cpp

        self.c = context
        self.slots = [_Slot(seq) for seq in range(context.n_seq)]
        self._batch = llama_cpp.llama_batch_init(context.n_batch, 0, 1)
        self._cancelled: set[int] = set()
        self._lock = threading.Lock()

    # -- requests --------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return any(s.reply is not None for s in self.slots)

    def cells_used(self) -> int:
        return sum(len(s.tokens) for s in self.slots)

    def start(self, request: int, tokens: list[int], params: GenerationParams) -> list[tuple[Any, ...]]:
        """Take a request: its sequence chosen, the part of its prompt the cache holds kept. Answered at
        once with SLOT_ERROR when it cannot run (no free slot, a prompt the sequence cannot hold)."""
        import llama_cpp

        if not tokens:
            return [(p.SLOT_ERROR, request, "the prompt is empty", [], None)]
        if len(tokens) >= self.c.n_ctx_seq:
            return [
                (
                    p.SLOT_ERROR,
                    request,
                    f"the prompt has {len(tokens):,} tokens, more than a slot's context holds ({self.c.n_ctx_seq:,})",
                    [],
                    None,
                )
            ]
        free = [s for s in self.slots if s.reply is None]
        if not free:
            return [(p.SLOT_ERROR, request, f"all {len(self.slots)} slots are busy", [], None)]
        slot = max(free, key=lambda s: (_shared(s.tokens, tokens), -s.used))
        keep = min(_shared(slot.tokens, tokens), len(tokens) - 1)  # the last token is read for its logits
        if keep < len(slot.tokens):
            memory = llama_cpp.llama_get_memory(self.c.ctx)
            if not llama_cpp.llama_memory_seq_rm(memory, slot.seq, keep, -1):  # a recurrent state cannot be cut
                llama_cpp.llama_memory_seq_rm(memory, slot.seq, -1, -1)
                keep = 0
            slot.tokens = slot.tokens[:keep]
        try:
            sampler = ReplySampler(params, self.c.n_vocab, self.c.vocab)
        except EngineError as exc:
            return [(p.SLOT_ERROR, request, str(exc), [], None)]
        stats = GenerationStats(prompt_tokens=len(tokens), reused_tokens=keep)
        stats.prompt_started = time.perf_counter()
        with self._lock:
            self._cancelled.discard(request)
        slot.reply = _Reply(request, params, sampler, list(tokens[keep:]), stats)
        slot.used = time.monotonic()
        return []

    def cancel(self, request: int) -> None:
        """Stop a request's reply at the next step (safe from any thread)."""
        with self._lock:
            self._cancelled.add(request)

    def cancel_all(self) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for slot in self.slots:
            if slot.reply is not None:
                out += self._finish(slot, "user")
        return out

    # -- one step --------------------------------------------------------------------------------

    def step(self) -> list[tuple[Any, ...]]:
        """One llama_decode: the next token of each reply, and as much of waiting prompts as fits."""
        import llama_cpp

        out: list[tuple[Any, ...]] = []
        with self._lock:
            cancelled, self._cancelled = self._cancelled, set()
        for slot in self.slots:
            if slot.reply is not None and slot.reply.request in cancelled:
                out += self._finish(slot, "user")
        batch, n = self._batch, 0
        placed: list[tuple[_Slot, list[int], bool]] = []  # (slot, tokens in this batch, logits for the last)
        for slot in self.slots:
            reply = slot.reply
            if reply is not None and reply.next_token is not None:
                n = self._put(batch, n, slot, [reply.next_token], True)
                placed.append((slot, [reply.next_token], True))
        for slot in sorted((s for s in self.slots if s.reply is not None and s.reply.left), key=lambda s: s.used):
            reply = slot.reply
            assert reply is not None
            room = self.c.n_batch - n
            if room <= 0:
                break
            chunk = reply.left[:room]
            last = len(chunk) == len(reply.left)
            n = self._put(batch, n, slot, chunk, last)
            placed.append((slot, chunk, last))
        if not placed:
            return out
        batch.n_tokens = n
        rc = llama_cpp.llama_decode(self.c.ctx, batch)
        if rc != 0:
            return out + self._failed(rc, [slot for slot, _, _ in placed])
        now = time.perf_counter()
        index = 0
        for slot, tokens, logits in placed:
            reply = slot.reply
            assert reply is not None
            slot.tokens.extend(tokens)
            index += len(tokens)
            if reply.next_token is not None:
                reply.next_token = None
            else:
                del reply.left[: len(tokens)]
                if reply.left:
                    continue
                reply.stats.prompt_seconds = now - reply.stats.prompt_started
                reply.stats.generation_started = now
                out.append((p.SLOT_PREFILLED, reply.request, reply.stats.reused_tokens, reply.stats.prompt_seconds))
            if logits:
                token = reply.sampler.sample(self.c.ctx, index - 1)
                top = reply.params.top_logprobs
                if top >= 0 and not llama_cpp.llama_vocab_is_eog(self.c.vocab, token):
                    entry = token_logprob(self.c.ctx, index - 1, self.c.n_vocab, token, top, self.c.piece)
                    reply.stats.logprobs.append(entry)
                out += self._sampled(slot, token)
        return out

    def _put(self, batch: Any, n: int, slot: _Slot, tokens: list[int], logits: bool) -> int:
        start = len(slot.tokens)
        for j, token in enumerate(tokens):
            batch.token[n + j] = token
            batch.pos[n + j] = start + j
            batch.n_seq_id[n + j] = 1
            batch.seq_id[n + j][0] = slot.seq
            batch.logits[n + j] = logits and j == len(tokens) - 1
        return n + len(tokens)

    def _sampled(self, slot: _Slot, token: int) -> list[tuple[Any, ...]]:
        """A reply's new token: the end, a stop string, its text sent, or the token read at the next step."""
        import llama_cpp

        reply = slot.reply
        assert reply is not None
        if llama_cpp.llama_vocab_is_eog(self.c.vocab, token):
            return self._finish(slot, "eos")
        reply.stats.generated_tokens += 1
        reply.pending += reply.decoder.decode(self.c.piece(token))
        cut = first_stop(reply.pending, reply.params.stop)
        if cut is not None:
            drop_cut(reply.stats.logprobs, len(reply.pending) - cut)
            reply.outbox += reply.pending[:cut]
            reply.pending = ""
            return self._finish(slot, "stop")
        safe = len(reply.pending) - partial_marker(reply.pending, reply.params.stop)
        reply.outbox += reply.pending[:safe]
        reply.pending = reply.pending[safe:]
        if reply.stats.generated_tokens >= reply.params.max_tokens:
            return self._finish(slot, "length")
        if len(slot.tokens) >= self.c.n_ctx_seq:
            return self._finish(slot, "context")
        reply.next_token = token
        now = time.monotonic()
        if reply.outbox and now - reply.sent_at >= PIECE_INTERVAL:
            reply.sent_at = now
            text, reply.outbox = reply.outbox, ""
            return [self._piece(reply, text)]
        return []

    def _piece(self, reply: _Reply, text: str) -> tuple[Any, ...]:
        logprobs = reply.stats.logprobs
        shown = len(logprobs) - held_back(logprobs, len(reply.pending))  # not those whose text is held back
        entries = logprobs[reply.logprobs_sent : shown]
        reply.logprobs_sent = max(reply.logprobs_sent, shown)
        return (p.SLOT_PIECE, reply.request, text, reply.stats.generated_tokens, entries, self.cells_used())

    def _finish(self, slot: _Slot, stopped_by: str) -> list[tuple[Any, ...]]:
        reply = slot.reply
        assert reply is not None
        slot.reply = None
        reply.sampler.free()
        stats = reply.stats
        stats.stopped_by = stopped_by
        if stats.generation_started:
            stats.generation_seconds = time.perf_counter() - stats.generation_started
        text = reply.outbox + (reply.pending if stopped_by != "stop" else "")
        reply.pending = ""  # sent now, with its tokens' log-probabilities
        out: list[tuple[Any, ...]] = []
        if text:
            out.append(self._piece(reply, text))
        out.append((p.SLOT_DONE, reply.request, stats, self.cells_used()))
        return out

    def _failed(self, rc: int, slots: list[_Slot]) -> list[tuple[Any, ...]]:
        """A batch llama.cpp did not decode: a stop ends every reply in it, anything else fails them."""
        import llama_cpp

        from app.engine.llama_log import capture

        if rc == 2:  # aborted: the engine was told to stop
            return [m for slot in slots for m in self._finish(slot, "user")]
        reason = {1: "the KV cache is full", -2: "out of memory", -3: "the computation failed"}.get(rc, f"error {rc}")
        errors = capture().errors()
        out: list[tuple[Any, ...]] = []
        memory = llama_cpp.llama_get_memory(self.c.ctx)
        for slot in slots:
            reply = slot.reply
            assert reply is not None
            slot.reply = None
            reply.sampler.free()
            # the batch may have left some of its cells behind: this sequence starts again from nothing
            with contextlib.suppress(Exception):
                llama_cpp.llama_memory_seq_rm(memory, slot.seq, -1, -1)
            slot.tokens = []
            out.append((p.SLOT_ERROR, reply.request, f"llama.cpp could not decode ({reason})", errors[-3:], rc))
        return out

    def close(self) -> None:
        import llama_cpp

        for slot in self.slots:
            if slot.reply is not None:
                slot.reply.sampler.free()
                slot.reply = None
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None


def _shared(a: list[int], b: list[int]) -> int:
    """How many tokens two lists share at their start."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n

"""A fake engine for fast UI tests: deterministic replies and timings, and the buffers of the plan it loads.

Its measurements are the planner's figures for the path and configuration it is given, on the devices the app
sees (`devices`, else this machine's or VRAMCHAT_DEVICES'): a screen that shows planned beside allocated shows
them agree, as they do with llama.cpp (the accuracy tests hold that to the byte).

What it stands for (its option in brackets), each with the real engine process's twin:

- a load from the picker, its buffers [load]: tests/tui/test_tui_real.py (the demo),
  tests/tui/test_engine_twins.py (a zoo model, every buffer as planned)
- a load that fails, told in a dialog [fail_load]: tests/tui/test_engine_twins.py (a file cut short)
- a load out of memory, then a smaller plan [out_of_memory_loads]: tests/app/test_load_retry_real.py (the
  session and the command line), tests/vulkan/test_vulkan_heap.py (Vulkan0 refusing its buffer)
- a reply streamed, stopped with Esc [reply, delay, stop]: tests/tui/test_tui_real.py,
  tests/tui/test_engine_twins.py
- a prompt read in batches, its progress [prefill_seconds]: tests/app/test_engine_process.py
- the engine killed between replies, noticed and reloaded [die, exit_while_idle]:
  tests/tui/test_engine_twins.py; killed mid-reply: tests/tui/test_engine_crash_pty.py
- a context made larger or smaller [ElasticFakeEngine]: tests/app/test_elastic_context.py
- pictures through a projector [tokenize_media]: tests/app/test_engine_media.py, tests/app/test_cli_images.py
- out of memory mid-reply, reloaded smaller [out_of_memory_after]: no twin; llama.cpp reserves a decode's
  buffers when the context is made, so on a CPU the failure cannot be met mid-reply (the recovery policy it
  drives is tests/app/test_recovery.py's, with no fake)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from app.engine import GenerationParams, GenerationStats, LoadReport, Measurements
from app.engine.types import MediaPrompt, ProjectorInfo, ProjectorLoad, Prompt, PromptProgress, PromptWatcher
from planner.config import LoadConfig

if TYPE_CHECKING:
    from app.devices import DeviceReport

DEFAULT_REPLY = "The capital of France is **Paris**."
IMAGE_TOKENS = 16


class FakeEngine:
    def __init__(
        self,
        reply: str = DEFAULT_REPLY,
        delay: float = 0.0,
        n_ctx: int | None = None,
        fail_load: str = "",
        out_of_memory_loads: int = 0,
        out_of_memory_after: int = -1,
        prefill_seconds: float = 0.0,
    ) -> None:
        """`fail_load`: every load fails with this message. `out_of_memory_loads`: the first N loads
        fail as llama.cpp does when a buffer cannot be allocated. `out_of_memory_after`: the next
        reply's decode runs out of memory after this many words (once)."""
        self.reply = reply
        self.delay = delay
        self.n_ctx_override = n_ctx
        self.fail_load = fail_load
        self.out_of_memory_loads = out_of_memory_loads
        self.out_of_memory_after = out_of_memory_after
        self.prefill_seconds = prefill_seconds  # a long prompt's reading, in steps the app can show
        self.loads: list[LoadConfig] = []
        self.report: LoadReport | None = None
        self.last_stats = GenerationStats()
        self.prompts: list[list[int]] = []
        self.params: list[GenerationParams] = []
        self._cells = 0
        self._stop = threading.Event()
        self.started = threading.Event()
        self.stall_timeout: float | None = None
        self.stall_on_rpc = False
        self.resizes: list[int] = []
        self.encoding: tuple[int, int] | None = None
        self.media_prompts: list[MediaPrompt] = []
        self.resizable = False  # a context of fixed size, unless a test makes it grow (ElasticFakeEngine)
        self.dead = False
        # the devices the app planned for (tests.support.tui_helpers.make_app wires the app's); None: probed here
        self.devices: Callable[[], DeviceReport | None] = lambda: None

    def load(
        self,
        path: str,
        config: LoadConfig,
        progress: Callable[[float], bool | None] | None = None,
        projector: ProjectorLoad | None = None,
    ) -> LoadReport:
        for f in (0.25, 0.5, 1.0):
            if progress is not None:
                progress(f)
        from app.engine import EngineError

        self.loads.append(config)
        self.dead = False
        if self.fail_load:
            raise EngineError(self.fail_load)
        if self.out_of_memory_loads:
            self.out_of_memory_loads -= 1
            lines = [
                f"ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size {1 << 30}",
                f"alloc_tensor_range: failed to allocate CPU buffer of size {1 << 30}",
                "llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache",
            ]
            raise EngineError("could not create the context: " + "; ".join(lines), lines)
        n_ctx = self.n_ctx_override or max(256, config.n_ctx)
        m = self.measured(path, replace(config, n_ctx=n_ctx))
        self.report = LoadReport(path, config, 0.5, m, n_ctx, 512, None)
        if projector is not None:  # a projector that sees: each picture 16 tokens, as tiny Gemma 3's
            self.report.projector = ProjectorInfo(projector.path, True, False, projector.marker, 0.1)
        self._cells = 0
        return self.report

    def measured(self, path: str, config: LoadConfig) -> Measurements:
        """What llama.cpp would report for this load: the plan's buffers, each under its log name."""
        from app.devices import probe_devices
        from planner.anatomy import load_anatomy
        from planner.gguf import read_gguf
        from planner.memory import plan_memory

        report = self.devices() or probe_devices()
        plan = plan_memory(load_anatomy(read_gguf(path)), config, report.gpus, report.host)
        m = Measurements()
        tables = dict(m.tables())
        for buffer in plan.buffers:
            table = tables[buffer.kind]
            table[buffer.name] = table.get(buffer.name, 0) + buffer.bytes
        return m

    @property
    def loaded(self) -> bool:
        return self.report is not None

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return [ord(c) % 512 for c in text]  # one token per character: easy to reason about

    def tokenize_media(self, prompt: MediaPrompt) -> list[int]:
        marker = self.report.projector.marker if self.report is not None and self.report.projector else ""
        parts = prompt.text.split(marker) if marker else [prompt.text]
        cells: list[int] = []
        for i, part in enumerate(parts):
            if i:
                cells += [-1] * IMAGE_TOKENS
            cells += self.tokenize(part)
        return cells

    def special_text(self, which: str) -> str:
        return "</s>" if which == "eos" else "<s>"

    def kv_cells_used(self) -> int:
        return self._cells

    @property
    def pid(self) -> int | None:
        return None  # llama.cpp does not run anywhere

    def exit_while_idle(self):
        """As an engine process killed while idle reports it (after `die()`), once."""
        if not self.dead or self.report is None:
            return None
        import signal

        from app.engine.crash import EngineExit

        self.report = None
        return EngineExit(-signal.SIGKILL, "idle")

    def die(self) -> None:
        """The engine process is killed between replies (kill -9, the OOM killer)."""
        self.dead = True

    def dry_run(self, path: str, config: LoadConfig) -> None:
        """A fake has no llama.cpp to ask: the session loads the plan as it is."""
        return None

    def resize(self, n_ctx: int, keep: bool = True):
        from dataclasses import replace

        from app.engine.types import ResizeReport

        assert self.report is not None
        self.resizes.append(n_ctx)
        n_ctx = self.n_ctx_override or n_ctx  # a context fixed by the test stays as it is
        self.report = replace(self.report, n_ctx=n_ctx)
        if not keep:
            self._cells = 0
        return ResizeReport(n_ctx, 0.01, self._cells, 0)

    def stop(self) -> None:
        self._stop.set()

    def unload(self) -> None:
        self.report = None
        self._cells = 0

    def generate(
        self, prompt: Prompt, params: GenerationParams | None = None, progress: PromptWatcher | None = None
    ) -> Iterator[str]:
        params = params or GenerationParams()
        if isinstance(prompt, MediaPrompt):
            self.media_prompts.append(prompt)
            tokens = self.tokenize_media(prompt)
        else:
            tokens = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
        self.prompts.append(tokens)
        self.params.append(params)
        self._stop.clear()
        stats = GenerationStats(prompt_tokens=len(tokens))
        self.last_stats = stats
        if self.prefill_seconds:
            stats.prompt_started = time.perf_counter()
            for step in range(1, 11):
                time.sleep(self.prefill_seconds / 10)
                stats.prompt_read = len(tokens) * step // 10
                self._cells = stats.prompt_read  # the cache fills as the prompt is read
                reading = stats.reading_prompt()
                if progress is not None and reading is not None:
                    progress(PromptProgress(*reading))  # as an engine process tells it, batch by batch
        stats.generation_started = time.perf_counter()
        self._cells = len(tokens)
        self.started.set()
        words = self.reply.split(" ")
        stats.stopped_by = "eos"
        for i, word in enumerate(words[: params.max_tokens]):
            if self._stop.is_set():
                stats.stopped_by = "user"
                break
            if self.delay:
                time.sleep(self.delay)
            if self._stop.is_set():
                stats.stopped_by = "user"
                break
            if i == self.out_of_memory_after:
                from app.engine import EngineError

                self.out_of_memory_after = -1
                line = "ggml_gallocr_reserve_n: failed to allocate CPU buffer of size 1073741824"
                raise EngineError(f"llama.cpp could not decode (out of memory): {line}", [line], -2)
            stats.generated_tokens += 1
            self._cells += 1
            yield word if i == 0 else " " + word
        else:
            if len(words) > params.max_tokens:
                stats.stopped_by = "length"
        stats.generation_seconds = 0.5
        self.started.clear()


class ElasticFakeEngine(FakeEngine):
    """A FakeEngine whose context can be made larger or smaller (as the engine process's can): its buffers
    are planned again at each size, so the dashboard's figures follow the context size and agree with the plan
    (the tiny llama-f16's KV cache is 1 KiB a cell, `CELL`)."""

    CELL = 1024

    def __init__(self, *args, fail_growth: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fail_growth = fail_growth
        self.resizable = True

    def load(
        self,
        path: str,
        config: LoadConfig,
        progress: Callable[[float], bool | None] | None = None,
        projector: ProjectorLoad | None = None,
    ) -> LoadReport:
        return super().load(path, config, progress, projector)

    def resize(self, n_ctx: int, keep: bool = True):
        from dataclasses import replace

        from app.engine import EngineError
        from app.engine.types import ResizeReport

        assert self.report is not None
        if self.fail_growth and n_ctx > self.report.n_ctx:
            raise EngineError(
                f"could not grow the context to {n_ctx:,} tokens: ggml_backend_cpu_buffer_type_alloc"
                f"_buffer: failed to allocate buffer of size {n_ctx * self.CELL}"
            )
        self.resizes.append(n_ctx)
        m = self.measured(self.report.path, replace(self.report.config, n_ctx=n_ctx))
        self.report = replace(self.report, n_ctx=n_ctx, measurements=m)
        if not keep:
            self._cells = 0
        return ResizeReport(n_ctx, 0.01, self._cells, 0)

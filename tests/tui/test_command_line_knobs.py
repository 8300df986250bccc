"""`vramchat MODEL --ctx 512 --ctk q8_0 --ngl 0 --fa off`: the app plans the model as the command line asked
(the picker's fields start with the knobs), as `--plan` and `-p` do; it used to plan its own defaults."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, Select

from app.cli.launch import knobs_of
from app.cli.parser import build_parser
from app.settings import Settings
from app.tui.app import VramchatApp
from app.tui.services import AppOptions
from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import model_loaded, wait_for


async def test_the_command_lines_plan_knobs_are_what_the_app_loads(zoo: dict[str, Path]) -> None:
    model = str(zoo["llama-f16"])
    args = build_parser().parse_args([model, "--ctx", "512", "--ctk", "q8_0", "--ngl", "0", "--fa", "off"])
    engine = FakeEngine()
    options = AppOptions(model=model, knobs=knobs_of(args), engine_factory=lambda: engine)
    app = VramchatApp(options, Settings(scan_known_caches=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, model_loaded(app))
        plan = app.session.model.plan  # type: ignore[union-attr]
        assert plan.resolved.n_ctx == 512 and plan.resolved.type_k.name == "q8_0"
        assert plan.resolved.n_gpu_layers == 0 and plan.config.flash_attn is False
        picker = app.get_screen("picker")
        assert picker.query_one("#ctx", Input).value == "512" and picker.query_one("#kv", Select).value == "q8_0"


def test_every_layer_and_no_knob_read_as_the_picker_takes_them() -> None:
    parser = build_parser()
    everything = knobs_of(parser.parse_args(["model.gguf", "--ngl", "-1"]))
    assert everything.ngl and int(everything.ngl) > 1000 and everything.ctx == "" and everything.kv == "auto"
    plain = knobs_of(parser.parse_args(["model.gguf"]))
    assert (plain.ctx, plain.kv, plain.ngl, plain.fa) == ("", "auto", "", "auto")

"""One truth from every way in: each plan knob the command line takes, walked through `--plan --json`, the app
(`vramchat MODEL --knob`: the picker plans and the engine loads) and `-p --json`, is honoured by each, or refused
before anything starts with words that name it. A knob added to the parser without a case here fails the walk.

The app once dropped `--ctv`, `--ubatch` and `--batch` (its picker had fields for four knobs, turned into
strings and parsed back); `-p` sampled by a recipe of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.widgets import Input, Select

from app.cli import main
from app.cli.launch import app_options
from app.cli.parser import build_parser, negative_values_attached
from app.errors import UsageError
from app.settings import Settings
from app.tui.app import VramchatApp
from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import model_loaded, wait_for
from tests.support.vision import write_vision_pair

# the parser's groups whose flags shape a plan
PLAN_GROUPS = ("devices (what-if planning)", "wishes (the solver honours them)", "fixed configuration")
DEVICES = "8GiB/1GiB,ram=32GiB/8GiB"  # one simulated GPU, as the app's tests plan for


@dataclass(frozen=True)
class Seen:
    """What a way in planned and loaded: the configuration, each GPU's (name, total, margin), the host's RAM,
    the plan's reasons, whether a projector was planned."""

    config: dict
    gpus: dict[str, tuple[int, int]]
    host_total: int
    reasons: list[str]
    projector: bool


@dataclass(frozen=True)
class Knob:
    words: tuple[str, ...]
    honoured: Callable[[Seen], bool]
    vision: bool = False  # planned for the tiny gemma3 with its projector


KNOBS: dict[str, Knob] = {
    "--vram": Knob(("--vram", "4GiB"), lambda s: [t for t, _ in s.gpus.values()] == [4 << 30]),
    "--gpu": Knob(("--gpu", "RTX 4090"), lambda s: [t >> 30 for t, _ in s.gpus.values()] == [23]),  # 24 GB
    "--ram": Knob(("--ram", "16GiB"), lambda s: s.host_total == 16 << 30),
    "--margin": Knob(("--margin", "1536MiB"), lambda s: [m for _, m in s.gpus.values()] == [1536 << 20]),
    "--cpu": Knob(("--cpu",), lambda s: s.config["n_gpu_layers"] == 0 and not s.gpus),
    "--ctx": Knob(("--ctx", "2048"), lambda s: s.config["n_ctx"] == 2048),
    "--min-speed": Knob(("--min-speed", "5"), lambda s: any("--min-speed 5" in r for r in s.reasons)),
    "--mmproj": Knob(("--mmproj", "{mmproj}"), lambda s: s.projector, vision=True),
    "--image-max-tokens": Knob(("--mmproj", "{mmproj}", "--image-max-tokens", "64"), lambda s: s.projector, True),
    "--repack": Knob(("--repack", "off"), lambda s: s.config["cpu_extra_buffers"] is False),
    "--ngl": Knob(("--ngl", "2"), lambda s: s.config["n_gpu_layers"] == 2),
    "--ctk": Knob(("--ctk", "q8_0"), lambda s: s.config["type_k"] == "q8_0"),
    "--ctv": Knob(("--ctv", "q8_0", "--fa", "on"), lambda s: s.config["type_v"] == "q8_0"),
    "--fa": Knob(("--fa", "off"), lambda s: s.config["flash_attn"] is False),
    "--ubatch": Knob(("--ubatch", "128"), lambda s: s.config["n_ubatch"] == 128),
    "--batch": Knob(("--batch", "256", "--ubatch", "128"), lambda s: s.config["n_batch"] == 256),
    "--swa-full": Knob(("--swa-full", "on"), lambda s: s.config["swa_full"] is True),
    "--parallel": Knob(("--parallel", "2"), lambda s: s.config["n_seq_max"] == 2),
    "--n-cpu-moe": Knob(("--n-cpu-moe", "1"), lambda s: s.config["n_cpu_moe"] == 1),
}
# knobs every way takes alike before any mode runs (app/cli/__init__.py: the RPC servers for this process and
# the ones it starts; tests/rpc checks them with each way), and the context's growth, which a --plan states
# for the maximum context whatever it is
BEFORE_ANY_MODE = {"--rpc": "app/cli/__init__.py _use_rpc_servers", "--elastic": "checked below for the app and -p"}


def _plan_knobs() -> set[str]:
    parser = build_parser()
    return {
        action.option_strings[-1] if action.option_strings[-1].startswith("--") else action.option_strings[0]
        for group in parser._action_groups
        if group.title and group.title.startswith(PLAN_GROUPS)
        for action in group._group_actions
    }


def test_every_plan_knob_of_the_parser_has_its_case() -> None:
    assert _plan_knobs() == set(KNOBS) | set(BEFORE_ANY_MODE)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, zoo: dict[str, Path]) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("knobs")
    model, mmproj = write_vision_pair(folder, "gemma3")
    return {"text": zoo["llama-f16"], "moe": zoo["qwen3moe"], "vision": model, "mmproj": mmproj}


def _words(knob: Knob, models: dict[str, Path]) -> list[str]:
    return [w.format(mmproj=models["mmproj"]) for w in knob.words]


def _model_for(name: str, models: dict[str, Path]) -> Path:
    return models["moe"] if name == "--n-cpu-moe" else models["vision"] if KNOBS[name].vision else models["text"]


def _seen_from_json(data: dict, projector: bool) -> Seen:
    gpus = {d["name"]: (d["total"], d["margin"]) for d in data["devices"]}
    return Seen(data["config"], gpus, data["host"]["total"], data["reasons"], projector)


@pytest.mark.parametrize("name", sorted(KNOBS))
def test_plan_json_honours_the_knob(
    name: str, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", DEVICES)
    knob = KNOBS[name]
    code = main(["--plan", str(_model_for(name, models)), "--json", *_words(knob, models)])
    out = capsys.readouterr().out
    assert code in (0, 3), out
    data = json.loads(out)
    projector = any(b["kind"].startswith("projector") for b in data.get("buffers", []))
    assert knob.honoured(_seen_from_json(data, projector)), data


@pytest.mark.parametrize("name", sorted(KNOBS))
async def test_the_app_plans_and_loads_the_knob(
    name: str, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", DEVICES)
    knob = KNOBS[name]
    model = str(_model_for(name, models))
    args = build_parser().parse_args(negative_values_attached([model, *_words(knob, models)]))
    options = app_options(args)  # as `vramchat MODEL --knob` starts the app
    engine = FakeEngine()
    options.engine_factory = lambda: engine
    app = VramchatApp(options, Settings(scan_known_caches=False, elastic_context=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=30)
        loaded = app.session.model
        assert loaded is not None
        plan = loaded.plan
        seen = Seen(
            engine.loads[-1].to_json(),
            {d.name: (d.total, d.margin) for d in plan.gpus},
            plan.host.total,
            loaded.fit.reasons,
            plan.projector is not None,
        )
        assert knob.honoured(seen), seen


@pytest.mark.llama
@pytest.mark.parametrize("name", sorted(KNOBS))
def test_p_answers_with_the_knob(
    name: str, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", DEVICES)
    knob = KNOBS[name]
    code = main([str(_model_for(name, models)), "-p", "Hi", "-n", "2", "--json", *_words(knob, models)])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(out)
    assert knob.honoured(_seen_from_json(data, data.get("projector") is not None)), data


async def test_the_picker_shows_the_fields_and_says_the_rest(models: dict[str, Path], monkeypatch) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", DEVICES)
    words = [str(models["text"]), "--ctx", "2048", "--ctk", "q8_0", "--ctv", "q8_0", "--ubatch", "128"]
    options = app_options(build_parser().parse_args([*words, "--batch", "256", "--ngl", "-1"]))
    engine = FakeEngine()
    options.engine_factory = lambda: engine
    app = VramchatApp(options, Settings(scan_known_caches=False, elastic_context=False))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=30)
        picker = app.get_screen("picker")
        assert picker.query_one("#ctx", Input).value == "2048" and picker.query_one("#kv", Select).value == "q8_0"
        assert picker.query_one("#ngl", Input).value == "all"
        verdict = str(picker.query_one("#plan-verdict").render())
        assert "From the command line: V q8_0, batch 256, ubatch 128." in verdict
        config = engine.loads[-1]
        assert (config.type_v, config.n_batch, config.n_ubatch, config.n_ctx) == ("q8_0", 256, 128, 2048)


def test_knobs_llama_cpp_refuses_together_are_refused_before_the_app_starts(models: dict[str, Path]) -> None:
    parser = build_parser()
    model = str(models["text"])
    for words, said in (
        (["--ctv", "q8_0", "--fa", "off"], "a quantized V cache needs flash attention"),
        (["--ngl", "2", "--min-speed", "5"], "--min-speed is a wish"),
        (["--verify"], "--verify goes with --plan"),
    ):
        with pytest.raises(UsageError, match=said):
            app_options(parser.parse_args([model, *words]))
    with pytest.raises(UsageError, match="--mmproj goes with a MODEL"):
        app_options(parser.parse_args(["--mmproj", str(models["mmproj"])]))


@pytest.mark.llama
def test_elastic_is_honoured_by_the_app_and_p(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = str(models["text"])  # trained for 8,192 tokens: a growing context starts at 4,096
    for words, n_ctx in ((["--elastic", "off"], 8192), (["--elastic", "on"], 4096)):
        assert main([model, "-p", "Hi", "-n", "2", "--json", *words]) == 0
        assert json.loads(capsys.readouterr().out)["config"]["n_ctx"] == n_ctx
        options = app_options(build_parser().parse_args([model, *words]))
        assert options.elastic is (words[1] == "on")


async def test_model_is_read_once_and_its_selection_planned_once(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import shutil

    import planner.gguf
    from app.tui.screens.picker import PickerScreen

    monkeypatch.setenv("VRAMCHAT_DEVICES", DEVICES)
    model = tmp_path / "fresh.gguf"  # a file no test read before: its header is not in any cache yet
    shutil.copy(models["text"], model)
    reads: list[str] = []
    real = planner.gguf.read_gguf

    def counted(path, *args, **kwargs):
        import traceback

        if not any(f.filename.endswith("fake_engine.py") for f in traceback.extract_stack()):  # llama.cpp's load
            reads.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(planner.gguf, "read_gguf", counted)
    options = app_options(build_parser().parse_args([str(model), "--ctx", "2048", "--ngl", "3"]))
    engine = FakeEngine()
    options.engine_factory = lambda: engine
    app = VramchatApp(options, Settings(scan_known_caches=False, elastic_context=False))
    plans: list[int] = []
    real_start = PickerScreen._start_plan

    def start_plan(self: PickerScreen) -> None:
        plans.append(self._request)
        real_start(self)

    monkeypatch.setattr(PickerScreen, "_start_plan", start_plan)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=30)
        await pilot.pause(0.5)  # a plan the fields' own change events would ask for comes within this
    assert reads.count(str(model)) == 1, reads  # the command line read it; the list and the picker did not
    assert len(plans) == 1, plans  # selected with the command line's fields: planned once
    assert engine.loads[-1].n_ctx == 2048 and engine.loads[-1].n_gpu_layers == 3

"""`--plan --json` said again from the replay cache: the same output as planning, and never stale."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import app.cli.plan
import app.cli.replay
import app.devices.host
from app.caches.files import files_under
from app.cli import main

GiB = 1024**3


class Runs:
    """Runs `vramchat --plan ... --json` in this process with host RAM as set, telling replays apart."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        self.monkeypatch, self.capsys = monkeypatch, capsys
        self.total, self.free = 8 * GiB, 6 * GiB
        self.planned = 0
        monkeypatch.setattr(app.devices.host, "_meminfo", lambda: (self.total, self.free, 0, 0))
        monkeypatch.setattr(app.cli.replay, "_meminfo", lambda: (self.total, self.free))
        make_plan = app.cli.plan._make_plan

        def counting(args):
            self.planned += 1
            return make_plan(args)

        monkeypatch.setattr(app.cli.plan, "_make_plan", counting)

    def plan(self, *words: str) -> tuple[int, str, bool]:
        """(exit status, output, whether it was replayed)"""
        before = self.planned
        self.capsys.readouterr()
        code = main(["--plan", *words, "--json"])
        return code, self.capsys.readouterr().out, self.planned == before

    def fresh(self, home: Path, *words: str) -> str:
        """The output of planning from scratch (another home: no caches but this machine's measured
        speed, which a second probe would measure a little differently)."""
        from app.speed import machine as speed_machine

        measured = speed_machine.speed_folder() / speed_machine.MACHINE_FILE
        if measured.exists():
            folder = home / "cache" / speed_machine.FOLDER
            folder.mkdir(parents=True, exist_ok=True)
            (folder / speed_machine.MACHINE_FILE).write_bytes(measured.read_bytes())
        with self.monkeypatch.context() as m:
            m.setenv("VRAMCHAT_HOME", str(home))
            _code, out, replayed = self.plan(*words)
        assert not replayed
        return out


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Runs:
    return Runs(monkeypatch, capsys)


@pytest.fixture
def model(zoo: dict[str, Path], tmp_path: Path) -> str:
    path = tmp_path / "m.gguf"
    path.write_bytes(zoo["llama-f16"].read_bytes())
    return str(path)


def _entry(model: str) -> dict:
    (entry,) = (Path(os.environ["VRAMCHAT_HOME"]) / "cache" / app.cli.replay.FOLDER).glob("*.json")
    return json.loads(entry.read_text())


def test_a_second_plan_is_replayed_for_the_memory_free_now_as_planning_would_say_it(
    runs: Runs, model: str, tmp_path: Path
) -> None:
    code, first, replayed = runs.plan(model)
    assert code == 0 and not replayed
    runs.free -= 123_456_789  # other programs took some memory: the plan stays, its figures move
    code, again, replayed = runs.plan(model)
    assert code == 0 and replayed
    assert again == runs.fresh(tmp_path / "other-home", model)
    assert again != first
    data = json.loads(again)
    assert data["host"]["free"] == runs.free
    assert data["host"]["held_by_others"] == runs.total - runs.free


def test_free_memory_beyond_the_bounds_plans_again(runs: Runs, model: str, tmp_path: Path) -> None:
    runs.plan(model, "--ctx", "8192")
    low, _high = _entry(model)["bounds"]
    assert low > 0
    runs.free = low  # the least free memory for which every decision goes the same way
    _code, out, replayed = runs.plan(model, "--ctx", "8192")
    assert replayed and out == runs.fresh(tmp_path / "h1", model, "--ctx", "8192")
    runs.free = low - 1  # one byte less: a decision goes the other way
    _code, out, replayed = runs.plan(model, "--ctx", "8192")
    assert not replayed
    assert out == runs.fresh(tmp_path / "h2", model, "--ctx", "8192")


def test_a_plan_that_does_not_fit_is_replayed_with_its_exit_status(runs: Runs, model: str) -> None:
    runs.total, runs.free = 8 * GiB, 512 * 1024**2  # less than the margin kept free (819 MiB)
    code, first, replayed = runs.plan(model)
    assert code == 3 and not replayed and json.loads(first)["verdict"] == "no_fit"
    code, again, replayed = runs.plan(model)
    assert code == 3 and replayed and again == first


def test_a_changed_model_file_plans_again(runs: Runs, model: str) -> None:
    runs.plan(model)
    st = os.stat(model)
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert not runs.plan(model)[2]
    assert runs.plan(model)[2]


def test_other_flags_settings_devices_or_code_plan_again(
    runs: Runs, model: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    runs.plan(model)
    assert runs.plan(model)[2]
    assert not runs.plan(model, "--ctx", "2048")[2]  # other flags
    assert runs.plan(model)[2]

    runs.total += GiB  # more RAM in the machine
    assert not runs.plan(model)[2]
    assert runs.plan(model)[2]

    settings = Path(os.environ["VRAMCHAT_HOME"]) / "config" / app.cli.replay.SETTINGS_FILE
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"elastic_context": False}))
    _code, out, replayed = runs.plan(model)
    assert not replayed and "elastic" not in json.loads(out)

    with monkeypatch.context() as m:  # another CPU (its flags), or another llama.cpp build
        m.setattr(app.cli.replay, "_cpu_identity", lambda: ["flags : sse2"])
        assert not runs.plan(model)[2]
    with monkeypatch.context() as m:
        m.setattr(app.cli.replay, "_code", lambda: ["edited"])  # the planner's or the app's code
        assert not runs.plan(model)[2]
    mark = tmp_path / "nvidiactl"
    mark.touch()
    with monkeypatch.context() as m:  # a GPU driver appeared: the probe asks it, nothing is replayed
        m.setattr(app.cli.replay, "DRIVER_MARKS", (str(mark),))
        assert not runs.plan(model)[2]
        assert not runs.plan(model)[2]
    with monkeypatch.context() as m:  # simulated devices are never replayed
        m.setenv("VRAMCHAT_DEVICES", "8GiB")
        assert not runs.plan(model)[2]


def test_what_a_load_taught_the_planner_plans_again(runs: Runs, model: str) -> None:
    """A load that allocated more than the rules said is kept (app.devices.learned_buffers) and the next
    plan of that model counts it: a plan kept before that lesson is not said again."""
    from app.devices.learned_buffers import FILE_NAME
    from app.paths import data_dir

    runs.plan(model)
    assert runs.plan(model)[2]
    assert app.cli.replay.LEARNED_FILE == FILE_NAME
    lessons = data_dir() / FILE_NAME
    lessons.parent.mkdir(parents=True, exist_ok=True)
    lessons.write_text("{}")
    assert not runs.plan(model)[2]
    assert runs.plan(model)[2]


def test_plans_for_simulated_devices_or_checked_by_llama_cpp_are_never_kept(runs: Runs, model: str) -> None:
    for extra in (["--vram", "8GiB"], ["--ram", "16GiB"], ["--llama-args"], ["--rpc", "none", "--vram", "4GiB"]):
        runs.plan(model, *extra)
        assert not runs.plan(model, *extra)[2], extra
    runs.plan(model, "--cpu")  # what the probe finds, without the GPUs: kept
    assert runs.plan(model, "--cpu")[2]


def test_the_code_stamp_sees_an_edited_file(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    source = tmp_path / "pkg" / "rules.py"
    source.write_text("A = 1\n")
    before = files_under(str(tmp_path))
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert files_under(str(tmp_path)) != before


def test_the_probe_s_marks_and_settings_file_are_the_replay_s() -> None:
    import app.devices.nvml
    import app.devices.rocm
    import app.settings

    assert set(app.devices.nvml._DRIVER_MARKS) <= set(app.cli.replay.DRIVER_MARKS)
    assert app.devices.rocm._AMDGPU_MODULE in app.cli.replay.DRIVER_MARKS
    assert app.cli.replay.SETTINGS_FILE == app.settings.SETTINGS_FILE


def test_the_replay_imports_no_planner_dataclasses_nor_probes(model: str, tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    from app.speed import machine as speed_machine

    # this machine's kept speed figures (a plan still measuring them is not kept to be said again)
    shutil.copytree(speed_machine.speed_folder(), tmp_path / "home" / "cache" / speed_machine.FOLDER)
    env = dict(os.environ, VRAMCHAT_HOME=str(tmp_path / "home"))
    cmd = [sys.executable, "-m", "app", "--plan", model, "--json"]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    probe = "import runpy, sys; sys.argv = ['vramchat', *sys.argv[1:]]\n"
    probe += "try:\n    runpy.run_module('app', run_name='__main__')\nexcept SystemExit:\n    pass\n"
    heavy = "('planner.', 'app.devices', 'textual', 'dataclasses')"
    probe += f"print(sorted(m for m in sys.modules if m.startswith({heavy})))"
    again = subprocess.run(
        [sys.executable, "-c", probe, "--plan", model, "--json"], capture_output=True, text=True, env=env, check=True
    )
    loaded = again.stdout.strip().splitlines()[-1]
    # planner.dataclass_code: what would keep dataclasses' compiled code, waiting for a dataclasses import that
    # never comes (the 'dataclasses' module itself is not loaded)
    assert loaded == "['planner.dataclass_code', 'planner.free_lines', 'planner.units']", loaded
    assert json.loads(again.stdout[: again.stdout.rindex("}") + 1])["model"] == json.loads(first.stdout)["model"]

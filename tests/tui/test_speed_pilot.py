"""The picker's plan panel says how fast the plan will run, and the figure follows the knobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from app.tui.screens.picker import PickerScreen
from tests.support.tui_helpers import make_app, picker_ready, wait_for

SIZE = (160, 45)


def _verdict(screen: PickerScreen) -> str:
    return str(screen.query_one("#plan-verdict").render())


def _shelf_of(tmp_path: Path, name: str, model: Path) -> Path:
    """A models folder holding one file."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    (shelf / name).symlink_to(model)
    return shelf


async def test_a_what_if_card_with_a_bandwidth_speeds_up_with_the_layers_on_it(
    tmp_path: Path, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB,bw=1008GB/s,ram=32GiB")
    app = make_app(_shelf_of(tmp_path, "gemma.gguf", gemma_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        await wait_for(pilot, lambda: screen.speed is not None)
        assert screen.speed is not None
        everything = screen.speed.decode_start
        assert screen.result is not None and screen.result.plan.verdict == "full_gpu"
        assert everything.basis == "table" and everything.value is not None
        assert (
            "Speed:" in _verdict(screen) and "tok/s at the start" in _verdict(screen) and "(table)" in _verdict(screen)
        )

        ngl = screen.query_one("#ngl", Input)
        await pilot.pause()  # the speed line just grew the verdict: let the layout settle before clicking
        await pilot.click("#ngl")
        await wait_for(pilot, lambda: ngl.has_focus)
        await pilot.press("0")
        await wait_for(pilot, lambda: ngl.value == "0")
        await wait_for(pilot, lambda: screen.result is not None and screen.result.plan.layers_on_gpu == 0)
        await wait_for(pilot, lambda: screen.speed is not None and screen.speed.decode_start.basis != "table")
        on_cpu = screen.speed.decode_start
        assert on_cpu.basis == "measured" and on_cpu.value is not None
        assert on_cpu.value < everything.value  # the card streams the weights faster than this CPU
        assert "(measured" in _verdict(screen)  # "(measured while ... busy" on a busy machine

        ngl.value = "10"  # some layers on the card: between the two
        await wait_for(pilot, lambda: screen.result is not None and screen.result.plan.layers_on_gpu == 10)
        await wait_for(pilot, lambda: screen.speed is not None and screen.speed.decode_start.basis == "table")
        some = screen.speed.decode_start
        assert some.value is not None and on_cpu.value < some.value < everything.value


async def test_a_what_if_card_without_a_bandwidth_says_what_is_missing(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB,ram=32GiB")
    app = make_app(_shelf_of(tmp_path, "tiny.gguf", zoo["llama-f16"]))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        await wait_for(pilot, lambda: screen.speed is not None)
        text = _verdict(screen)
        assert "Speed: unknown" in text and "bw=" in text


async def test_a_speed_still_measuring_fills_in_once_the_cpu_is_measured(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned while other programs kept the CPUs busy, the plan panel said "measuring…" until the model
    was selected again. It asks again once the probe may run again, and the figure fills in."""
    from tests.support.speed import BusyThenQuiet

    probe = BusyThenQuiet(monkeypatch)
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB,bw=1008GB/s,ram=32GiB")
    app = make_app(_shelf_of(tmp_path, "tiny.gguf", zoo["llama-f16"]))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        await wait_for(pilot, lambda: screen.speed is not None)
        assert screen.speed is not None and screen.speed.decode_start.basis == "measuring"
        assert "measuring" in _verdict(screen)
        probe.quiet()  # the other programs are done
        await wait_for(pilot, lambda: screen.speed is not None and screen.speed.decode_start.value is not None)
        await wait_for(pilot, lambda: "measuring" not in _verdict(screen) and "tok/s at the start" in _verdict(screen))

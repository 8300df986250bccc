"""The picker: F6 adds an RPC server, saved in the settings, and the models are planned for its devices."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import Input, Static

from app.rpc.endpoint import Endpoint
from app.settings import load_settings
from app.tui.screens.picker import PickerScreen
from tests.support.tui_helpers import make_app, picker_ready, wait_for

SIZE = (160, 45)


async def test_f6_adds_a_server_and_the_plans_use_its_device(
    tmp_path: Path, zoo: dict[str, Path], rpc_endpoints: list[Endpoint]
) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    shutil.copy(zoo["llama-f16"], shelf / "llama-f16.gguf")
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        assert "RPC0" not in str(screen.query_one("#device-line", Static).render())
        await pilot.press("f6")
        await wait_for(pilot, lambda: bool(app.screen.query("#rpc-servers")))
        field = app.screen.query_one("#rpc-servers", Input)
        field.value = "not-a-server"
        await pilot.press("enter")
        assert "HOST:PORT" in str(app.screen.query_one("#rpc-error", Static).render())  # refused, dialog stays
        field.value = str(rpc_endpoints[0])
        await pilot.press("enter")
        await wait_for(pilot, lambda: "RPC0" in str(screen.query_one("#device-line", Static).render()))
        await wait_for(pilot, picker_ready(app))
        assert load_settings()[0].rpc_servers == [str(rpc_endpoints[0])]
        assert "RPC0" in str(screen.query_one("#plan-text", Static).render())

"""The app serves too: /serve puts the loaded demo behind the OpenAI API on the same engine while the chat
goes on (a request and a chat reply take turns), the status line says where it listens, the dashboard
(F3) shows the requests, and /serve again stops it. Driven with Textual's pilot, the real engine."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.settings import Settings
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dashboard import DashboardScreen
from app.tui.widgets.chat.context_line import ContextLine
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.server_panel import ServerPanel
from tests.support.tui_helpers import make_app, model_loaded, reply_done, wait_for

pytestmark = pytest.mark.llama


async def test_the_app_serves_the_loaded_model_while_it_chats(
    gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openai import OpenAI

    monkeypatch.delenv("VRAMCHAT_API_KEY", raising=False)
    settings = Settings(scan_known_caches=False, temperature=0.0, max_tokens=24, elastic_context=False)
    app = make_app(None, model=str(gemma_path), settings=settings, real_engine=True)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=60)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        box = chat.query_one(ChatInput)
        box.focus()
        await pilot.press(*"/serve", "enter")
        await wait_for(pilot, lambda: app.serving.running, timeout=30)
        url = app.serving.url
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        await wait_for(pilot, lambda: f"serving {url}" in str(chat.query_one(ContextLine).render()))

        answers: list[str] = []

        def ask() -> None:  # another tool, while the chat replies
            client = OpenAI(base_url=url, api_key="none", max_retries=0)
            q = [{"role": "user", "content": "What is the capital of Italy?"}]
            answers.append(
                client.chat.completions.create(model="demo", messages=q, max_tokens=6).choices[0].message.content or ""
            )

        tool = threading.Thread(target=ask)
        box.focus()
        await pilot.press(*"What is the capital of France?", "enter")
        tool.start()
        await wait_for(pilot, reply_done(app), timeout=120)
        await wait_for(pilot, lambda: not tool.is_alive(), timeout=120)
        tool.join()
        assert "Paris" in list(chat.query(MessageView))[-1].text
        assert answers and answers[0].startswith("Rome")

        await pilot.press("f3")
        dash = app.screen
        assert isinstance(dash, DashboardScreen)
        panel = dash.query_one(ServerPanel)
        await wait_for(pilot, lambda: " 200 chat " in str(panel.render()), timeout=10)
        text = str(panel.render())
        assert f"Serving gemma-3-270m-q4_k_m at {url}" in text and "1 served" in text
        await pilot.press("escape")
        await pilot.pause()
        # in a smaller terminal the dashboard is one column, the graphs first: it opens on the server's panel
        await pilot.resize_terminal(100, 34)
        await pilot.pause()
        await pilot.press("f3")
        dash = app.screen
        assert isinstance(dash, DashboardScreen) and not dash.has_class("-wide")
        await pilot.pause()
        panel = dash.query_one(ServerPanel)
        assert 0 <= panel.region.y < dash.size.height, (panel.region, dash.size)
        await pilot.press("escape")
        await pilot.pause()

        box = chat.query_one(ChatInput)
        box.focus()
        await pilot.press(*"/serve", "enter")
        await wait_for(pilot, lambda: not app.serving.running, timeout=30)
        await wait_for(pilot, lambda: "serving" not in str(chat.query_one(ContextLine).render()))

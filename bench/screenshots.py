"""The README's screenshots, taken from the real app on this machine with the demo model.

    python bench/screenshots.py [--out assets]

Runs vramchat headless (a private home, the real engine, the real devices), takes
the picker, then loads the demo model, asks two questions and takes the chat with
its memory dashboard; then, each during a reply that is still streaming, the memory
panel at 100 columns (its narrowest) and the full dashboard (F3) at 200. Writes SVGs
(Textual's own screenshots); render one to look at it with
`chromium --headless --screenshot=out.png --window-size=W,H file.svg`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SIZE = (140, 38)
PANEL_SIZE = (100, 40)
FULL_SIZE = (200, 50)
SHOTS = (
    "screenshot-picker.svg",
    "screenshot-chat.svg",
    "screenshot-panel-100.svg",
    "screenshot-dashboard-200.svg",
)
LONG_QUESTIONS = ("Recite the alphabet forty times.", "Count from one to two hundred in words.")  # greedy: long


async def _during_a_reply(app, pilot, question: str) -> None:
    """Send `question` and come back once the reply has streamed for a few seconds."""
    from app.tui.widgets.chat_input import ChatInput
    from tests.support.tui_helpers import wait_for

    engine = app.session.engine
    before = engine.last_stats
    box = app.screen.query_one(ChatInput)
    box.focus()
    box.load_text(question)
    await pilot.press("enter")
    # a busy machine reads the prompt and writes the first words slowly: minutes are allowed
    await wait_for(
        pilot, lambda: engine.last_stats is not before and engine.last_stats.generated_tokens >= 12, timeout=600
    )
    await pilot.pause(3.0)  # the plots see the reply's tokens/s and its KV cache grow


async def shoot(out: Path) -> None:
    from app.settings import Settings
    from app.tui.app import AppOptions, VramchatApp
    from app.tui.widgets.chat_input import ChatInput
    from tests.support.tui_helpers import model_loaded, picker_ready, reply_done, wait_for

    app = VramchatApp(AppOptions(), Settings(scan_known_caches=False, temperature=0.0, max_tokens=64))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app), timeout=120)
        await pilot.pause(0.3)
        app.save_screenshot(str(out / "screenshot-picker.svg"))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app), timeout=120)
        for question in ("What is the capital of France?", "What is the capital of Germany?"):
            box = app.screen.query_one(ChatInput)
            box.focus()
            box.load_text(question)
            await pilot.press("enter")
            await pilot.pause(0.1)
            await wait_for(pilot, reply_done(app), timeout=120)
        await pilot.pause(8)  # some history for the graphs
        app.clear_notifications()
        await pilot.pause(0.2)
        app.save_screenshot(str(out / "screenshot-chat.svg"))

        app.settings.max_tokens = 400  # a reply long enough to be taken while it streams
        await pilot.resize_terminal(*PANEL_SIZE)
        await _during_a_reply(app, pilot, LONG_QUESTIONS[0])
        app.clear_notifications()
        await pilot.pause(0.6)
        app.save_screenshot(str(out / "screenshot-panel-100.svg"))
        await wait_for(pilot, reply_done(app), timeout=300)

        await pilot.resize_terminal(*FULL_SIZE)
        await _during_a_reply(app, pilot, LONG_QUESTIONS[1])
        await pilot.press("f3")
        await pilot.pause(2.0)
        app.clear_notifications()
        await pilot.pause(0.6)
        app.save_screenshot(str(out / "screenshot-dashboard-200.svg"))
        await pilot.press("escape")
        await wait_for(pilot, reply_done(app), timeout=300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "assets"))
    args = parser.parse_args()
    os.environ.setdefault("VRAMCHAT_HOME", tempfile.mkdtemp(prefix="vramchat-shots-"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    asyncio.run(shoot(out))
    for name in SHOTS:
        print(f"{out / name}: {(out / name).stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

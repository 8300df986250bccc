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
# greedy, the demo writes long replies to these
LONG_QUESTIONS = (
    "Write the numbers from 1 to 300, separated by commas.",
    "Recite the alphabet forty times.",
    "List every month twice.",
)


async def _during_a_reply(app, pilot) -> None:
    """Ask until a reply streams (a greedy base model ends some answers at once), and come back a
    second into it, while it still streams."""
    from app.tui.widgets.chat_input import ChatInput
    from tests.support.tui_helpers import reply_done, wait_for

    engine = app.session.engine
    for question in LONG_QUESTIONS:
        before = engine.last_stats
        box = app.screen.query_one(ChatInput)
        box.focus()
        box.load_text(question)
        await pilot.press("enter")
        # a busy machine reads the prompt and writes the first words slowly: minutes are allowed
        await wait_for(
            pilot,
            lambda before=before: (
                engine.last_stats is not before and (engine.last_stats.generated_tokens >= 12 or reply_done(app)())
            ),
            timeout=600,
        )
        if not reply_done(app)():
            await pilot.pause(1.2)  # the plots see the reply's tokens/s and its KV cache grow
            if not reply_done(app)():
                return  # still streaming: take it now
        await wait_for(pilot, reply_done(app), timeout=600)
    raise SystemExit("no question made the model write a long reply")


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
        await _during_a_reply(app, pilot)
        app.clear_notifications()
        await pilot.pause(0.6)
        app.save_screenshot(str(out / "screenshot-panel-100.svg"))
        await wait_for(pilot, reply_done(app), timeout=300)

        await pilot.resize_terminal(*FULL_SIZE)
        await pilot.press("ctrl+n")  # a new chat: the same long reply streams again
        await pilot.pause(1.0)
        await _during_a_reply(app, pilot)
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

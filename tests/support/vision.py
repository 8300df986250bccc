"""Tiny vision models: a text model of the zoo beside the tiny projector that fits it, and test pictures.

A projector fits a text model when the embeddings it writes are as wide as the model's input
(`planner.projectors.match`): the zoo's text models are 128 wide, Qwen3-VL's input 384 (its two
deepstack slices beside the main one), so its projector gets two deepstack layers.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.tiny import ZOO, TinySpec, write_tiny_model
from tests.support.tiny_projectors import PROJECTORS, ProjectorSpec, write_tiny_projector

# name: (the zoo's text model, its projector)
PAIRS: dict[str, tuple[TinySpec, ProjectorSpec]] = {
    "gemma3": (ZOO["gemma3"], PROJECTORS["gemma3"]),  # a fixed image size, attention both ways over an image
    "mistral3": (ZOO["mistral3"], PROJECTORS["mistral3"]),  # Pixtral with its patch merger
    "qwen3vl": (ZOO["qwen3vl"], PROJECTORS["qwen3vl"].with_(n_embd_text=384, deepstack=(0, 1))),  # M-RoPE
}


def write_vision_pair(folder: Path, name: str) -> tuple[Path, Path]:
    """`<folder>/tiny-<name>.gguf` and `mmproj-tiny-<name>.gguf` beside it, as model folders hold them."""
    folder.mkdir(parents=True, exist_ok=True)
    text, projector = PAIRS[name]
    model = write_tiny_model(folder / f"tiny-{name}.gguf", text)
    mmproj = write_tiny_projector(folder / f"mmproj-tiny-{name}.gguf", projector)
    return model, mmproj


def write_picture(path: Path, width: int, height: int, seed: int = 0) -> Path:
    """A picture with some structure (stripes and a disc), saved in the format its suffix names."""
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (width, height), (30 + seed * 40 % 200, 120, 200))
    draw = ImageDraw.Draw(im)
    for x in range(0, width, max(width // 8, 1)):
        draw.rectangle([x, 0, x + max(width // 16, 1), height], fill=(240, 200, 40))
    r = min(width, height) // 3
    draw.ellipse([width // 2 - r, height // 2 - r, width // 2 + r, height // 2 + r], fill=(200, 30, 30))
    im.save(path)
    return path

"""`vramchat MODEL -p TEXT --image FILE`: a tiny vision model of the zoo with its tiny projector, end to
end through the real engine process and libmtmd; the projector's buffers as planned beside what
ggml allocated for it (exact, read while the image was encoded); bad pictures and wrong projectors
answered with one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.projector import read_projector
from planner.projectors.compute import largest_image_pixels, largest_images, peak_compute
from tests.support.unprivileged import drop_file_override
from tests.support.vision import write_picture, write_vision_pair

pytestmark = pytest.mark.llama
VRAMCHAT = str(Path(sys.executable).with_name("vramchat"))


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([VRAMCHAT, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def shelf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("vision")
    for name in ("gemma3", "qwen3vl"):
        write_vision_pair(folder / name, name)
    return folder


def _projector_buffers(data: dict) -> dict[str, tuple[int, int]]:
    out = {}
    for kind in ("weights", "compute"):
        side = data["projector"][kind]
        out[kind] = (side["planned"]["CPU"], (side["allocated"] or {}).get("CPU"))
    return out


def test_a_picture_answered_end_to_end_with_the_projector_found_beside_the_model(shelf: Path, tmp_path: Path) -> None:
    model = shelf / "gemma3" / "tiny-gemma3.gguf"
    picture = write_picture(tmp_path / "stripes.png", 64, 64)
    ask = ["-p", "What is in this picture?", "--image", str(picture)]
    proc = _run(str(model), *ask, "--json", "--temp", "0", "-n", "8")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["answer"] and data["tokens"] > 0
    (image,) = data["images"]
    # Gemma 3's projector makes (64 / 8 / 2)^2 = 16 tokens of every image, and they are in the prompt
    assert image["tokens"] == 16 and image["name"] == "stripes.png" and not image["scaled"]
    assert data["prompt_tokens"] > 16
    # the projector's buffers: planned to the byte as ggml allocated them
    buffers = _projector_buffers(data)
    assert buffers["weights"][0] == buffers["weights"][1] > 0
    assert buffers["compute"][0] == buffers["compute"][1] > 0
    assert data["projector"]["path"].endswith("mmproj-tiny-gemma3.gguf")


def test_the_largest_image_grows_the_compute_buffer_to_the_plan_and_a_larger_one_is_scaled(
    shelf: Path, tmp_path: Path
) -> None:
    """A picture far beyond the largest image the plan allows is scaled down to it, with a note: the
    projector's compute buffer grows to the planned peak, and no further."""
    model = shelf / "qwen3vl" / "tiny-qwen3vl.gguf"
    mmproj = read_projector(shelf / "qwen3vl" / "mmproj-tiny-qwen3vl.gguf")
    assert largest_images(mmproj) == [(256, 256)] and largest_image_pixels(mmproj) == 256 * 256
    photo = write_picture(tmp_path / "photo.jpg", 1200, 1200)
    proc = _run(str(model), "-p", "Describe it.", "--image", str(photo), "--json", "-n", "4")
    assert proc.returncode == 0, proc.stderr
    assert "photo.jpg (1200×1200) is scaled to 256×256" in proc.stderr
    data = json.loads(proc.stdout)
    (image,) = data["images"]
    assert image["scaled"] and image["sent"] == [256, 256] and image["tokens"] > 0
    buffers = _projector_buffers(data)
    fa = data["config"]["flash_attn"]
    assert buffers["compute"] == (peak_compute(mmproj, fa)["CPU"],) * 2
    assert buffers["weights"][0] == buffers["weights"][1]


def test_image_max_tokens_makes_the_largest_image_smaller(shelf: Path, tmp_path: Path) -> None:
    model = shelf / "qwen3vl" / "tiny-qwen3vl.gguf"
    photo = write_picture(tmp_path / "photo.png", 300, 300)
    ask = ["-p", "Describe it.", "--image", str(photo), "--image-max-tokens", "64"]
    proc = _run(str(model), *ask, "--json", "-n", "2")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    mmproj = read_projector(shelf / "qwen3vl" / "mmproj-tiny-qwen3vl.gguf", image_max_tokens=64)
    (image,) = data["images"]
    assert image["scaled"] and image["tokens"] <= 64
    fa = data["config"]["flash_attn"]
    planned, allocated = _projector_buffers(data)["compute"]
    assert planned == peak_compute(mmproj, fa, image_max_tokens=64)["CPU"] and allocated <= planned


def test_several_pictures_in_one_question(shelf: Path, tmp_path: Path) -> None:
    model = shelf / "gemma3" / "tiny-gemma3.gguf"
    a = write_picture(tmp_path / "a.png", 80, 60, seed=1)
    b = write_picture(tmp_path / "b.jpg", 30, 40, seed=2)
    proc = _run(str(model), "-p", "Which differs?", "--image", str(a), "--image", str(b), "--json", "-n", "2")
    assert proc.returncode == 0, proc.stderr
    images = json.loads(proc.stdout)["images"]
    assert [i["name"] for i in images] == ["a.png", "b.jpg"] and all(i["tokens"] == 16 for i in images)


# -- bad input: one clear line, no traceback --------------------------------------------------------


def _fails(proc: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not proc.stdout


def test_bad_pictures_are_named_before_anything_loads(shelf: Path, tmp_path: Path) -> None:
    model = str(shelf / "gemma3" / "tiny-gemma3.gguf")
    ask = [model, "-p", "What is it?", "--image"]
    _fails(_run(*ask, str(tmp_path / "missing.png")), 1, "missing.png: no such file")
    notes = tmp_path / "notes.png"
    notes.write_text("these are words, not pixels\n")
    _fails(_run(*ask, str(notes)), 1, "notes.png: not an image vramchat can read")
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    _fails(_run(*ask, str(empty)), 1, "empty.jpg: the file is empty")
    _fails(_run(*ask, str(tmp_path)), 1, "is a folder, not a picture")
    huge = _png_header_only(tmp_path / "huge.png", 40_000, 30_000)
    _fails(_run(*ask, str(huge)), 1, "huge.png: the image is too large to open (1,200 million pixels")
    truncated = tmp_path / "cut.png"
    data = write_picture(tmp_path / "whole.png", 64, 64).read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    _fails(_run(*ask, str(truncated)), 1, "cut.png: the image is damaged")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="drops Linux capabilities when run as root")
def test_an_unreadable_picture(shelf: Path, tmp_path: Path) -> None:
    """A picture the user may not read: one clear line. Root reads every file (and CI runs as root), so the
    child runs without the capabilities that pass over file permissions (tests/support/unprivileged.py)."""
    secret = write_picture(tmp_path / "secret.png", 16, 16)
    secret.chmod(0)
    proc = subprocess.run(
        [VRAMCHAT, str(shelf / "gemma3" / "tiny-gemma3.gguf"), "-p", "?", "--image", str(secret)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        preexec_fn=drop_file_override,
    )
    _fails(proc, 1, "secret.png: cannot be read (Permission denied)")


def test_a_model_without_a_projector_and_a_projector_of_another_model(
    shelf: Path, tmp_path: Path, zoo: dict[str, Path]
) -> None:
    picture = write_picture(tmp_path / "p.png", 32, 32)
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "text.gguf").write_bytes(zoo["llama-f16"].read_bytes())
    _fails(
        _run(str(alone / "text.gguf"), "-p", "?", "--image", str(picture)),
        1,
        "has no vision projector beside it",
    )
    # Gemma 3's projector writes 128-wide embeddings, Qwen3-VL's text model reads 384
    wrong = _run(
        str(shelf / "qwen3vl" / "tiny-qwen3vl.gguf"),
        "-p",
        "?",
        "--image",
        str(picture),
        "--mmproj",
        str(shelf / "gemma3" / "mmproj-tiny-gemma3.gguf"),
    )
    _fails(wrong, 1, "writes image embeddings 128 wide, but")
    assert "reads 384: it is the projector of another model" in wrong.stderr
    _fails(_run(str(alone / "text.gguf"), "--image", str(picture)), 2, "--image and --audio go with -p")


def test_a_sound_given_as_a_picture_is_named(shelf: Path, tmp_path: Path) -> None:
    import wave

    sound = tmp_path / "beep.wav"
    with wave.open(str(sound), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * 1600)
    proc = _run(str(shelf / "gemma3" / "tiny-gemma3.gguf"), "-p", "?", "--image", str(sound))
    _fails(proc, 2, "beep.wav is a sound: give it with --audio")
    proc = _run(str(shelf / "gemma3" / "tiny-gemma3.gguf"), "-p", "?", "--audio", str(sound))
    _fails(proc, 1, "has no audio encoder")


def _png_header_only(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims a huge image (a decompression bomb's shape) and holds one row."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" + b"\0" * (3 * width))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return path

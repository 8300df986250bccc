"""Images through the engine process: libmtmd beside the model, positions kept across turns, the
projector's buffers read exactly, and the failures a user can meet said in words."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.attachments import inspect, prepare
from app.engine import EngineError, GenerationParams
from app.engine.process import EngineProcess
from app.engine.types import Media, MediaPrompt, ProjectorLoad
from planner.config import LoadConfig
from tests.support.vision import write_picture, write_vision_pair

pytestmark = pytest.mark.llama
GREEDY = GenerationParams(max_tokens=6, temperature=0)
CONFIG = LoadConfig(n_gpu_layers=0, n_ctx=8192, flash_attn=True)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("pairs")
    return {name: write_vision_pair(folder / name, name) for name in ("gemma3", "qwen3vl")}


def _picture(folder: Path, name: str, size: tuple[int, int], limit: int = 128 * 128, seed: int = 0) -> Media:
    path = write_picture(folder / name, *size, seed=seed)
    return prepare(inspect(path), path, limit)[0]


def _ask(engine: EngineProcess, prompt: MediaPrompt) -> str:
    return "".join(engine.generate(prompt, GREEDY))


@pytest.mark.parametrize("name", ["gemma3", "qwen3vl"])
def test_a_second_turn_reuses_the_image_and_answers_as_a_fresh_engine_would(
    pairs: dict[str, tuple[Path, Path]], tmp_path: Path, name: str
) -> None:
    """The image is encoded once for a two-turn chat, and the second turn (read after the cached image,
    at positions the engine tracked: M-RoPE for Qwen3-VL) is answered exactly as an engine that reads
    the whole conversation afresh answers it."""
    model, mmproj = pairs[name]
    load = ProjectorLoad(str(mmproj), use_gpu=False, flash_attn=True)
    picture = _picture(tmp_path, "p.png", (96, 72))
    engine, fresh = EngineProcess(), EngineProcess()
    try:
        engine.load(str(model), CONFIG, projector=load)
        marker = engine.report.projector.marker
        first = MediaPrompt(f"Q: {marker}\nWhat is this?\nA:", (picture,))
        reply = _ask(engine, first)
        assert len(engine.encoded) == 1 and engine.encoded[0].id == picture.id
        second = MediaPrompt(f"{first.text}{reply}\nQ: And the colours?\nA:", (picture,))
        again = _ask(engine, second)
        assert len(engine.encoded) == 1  # the image was not encoded again
        assert engine.last_stats.reused_tokens >= len(engine.tokenize_media(first)) - 1
        fresh.load(str(model), CONFIG, projector=load)
        assert _ask(fresh, second) == again
    finally:
        engine.close()
        fresh.close()


def test_the_projectors_buffers_are_read_while_it_encodes(pairs: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    from planner.projector import read_projector
    from planner.projectors.compute import compute_buffers
    from tests.support.compare_projectors import planned_weights

    model, mmproj = pairs["gemma3"]
    engine = EngineProcess()
    try:
        report = engine.load(str(model), CONFIG, projector=ProjectorLoad(str(mmproj), False, True))
        m = report.measurements
        p = read_projector(mmproj)
        # before an image: clip's warmup logged its compute buffer; the weights are not logged
        assert m.projector_weights == {}
        assert abs(m.projector_compute["CPU"] - compute_buffers(p, True)["CPU"]) <= 0.005 * 1024 * 1024
        marker = report.projector.marker
        _ask(engine, MediaPrompt(f"{marker}\nWhat?", (_picture(tmp_path, "a.png", (64, 64)),)))
        m = engine.report.measurements
        assert m.projector_weights == {"CPU": planned_weights(p)}
        assert m.projector_compute == {"CPU": compute_buffers(p, True)["CPU"]}
        # another picture, in another chat: the same buffers, each counted once
        _ask(engine, MediaPrompt(f"Q: {marker}\nAnd this?", (_picture(tmp_path, "b.png", (40, 30), seed=3),)))
        assert len(engine.encoded) == 2
        assert engine.report.measurements.projector_weights == {"CPU": planned_weights(p)}
        assert engine.report.measurements.projector_compute == {"CPU": compute_buffers(p, True)["CPU"]}
    finally:
        engine.close()


def test_a_projector_of_another_model_is_refused_by_libmtmd_in_words(pairs: dict[str, tuple[Path, Path]]) -> None:
    model, _ = pairs["qwen3vl"]
    _, wrong = pairs["gemma3"]
    engine = EngineProcess()
    try:
        with pytest.raises(EngineError) as err:
            engine.load(str(model), CONFIG, projector=ProjectorLoad(str(wrong), False, True))
        assert str(err.value).startswith("could not load the projector mmproj-tiny-gemma3.gguf")
        assert "mismatch between text model (n_embd = 384) and mmproj (n_embd = 128)" in str(err.value)
        assert not engine.loaded
    finally:
        engine.close()


def test_an_image_for_a_model_loaded_without_a_projector(pairs: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    model, _ = pairs["gemma3"]
    engine = EngineProcess()
    try:
        engine.load(str(model), CONFIG)
        with pytest.raises(EngineError, match="no projector is loaded"):
            _ask(engine, MediaPrompt("<__vramchat_media__>\nWhat?", (_picture(tmp_path, "a.png", (8, 8)),)))
        assert "".join(engine.generate("Q: hello\nA:", GREEDY))  # the engine is still there, and answers words
    finally:
        engine.close()


def test_a_picture_crosses_the_socket_once_and_again_to_a_child_that_lacks_it(
    pairs: dict[str, tuple[Path, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first prompt with a picture carries its pixels; later ones (counted, then answered) its key
    alone, without decoding it again; a new child, or one that let it go, is sent the pixels again."""
    from app.attachments import MediaShelf
    from app.engine import protocol as p

    model, mmproj = pairs["gemma3"]
    path = write_picture(tmp_path / "once.png", 80, 60, seed=7)
    attachment = inspect(path)
    sent: list[int] = []  # the pixel bytes of each prompt sent to the child
    send = EngineProcess._send

    def spy(self: EngineProcess, *message: object) -> None:
        if message[0] in (p.GENERATE, p.TOKENIZE_MEDIA):
            prompt = message[1]
            assert isinstance(prompt, MediaPrompt)
            assert all(m.reader is None for m in prompt.media)  # what reads the file stays on this side
            sent.append(sum(len(m.data) for m in prompt.media))
        send(self, *message)

    monkeypatch.setattr(EngineProcess, "_send", spy)
    load = ProjectorLoad(str(mmproj), use_gpu=False, flash_attn=True)
    engine = EngineProcess()
    try:
        engine.load(str(model), CONFIG, projector=load)
        marker = engine.report.projector.marker

        def turn() -> MediaPrompt:  # each turn prepares its pictures afresh, as the chat screen does
            shelf = MediaShelf(128 * 128)
            shelf.add(attachment, path)
            return MediaPrompt(f"Q: {marker}\nWhat is this?\nA:", (shelf(attachment.id),))

        pixels = 80 * 60 * 3
        counted = engine.tokenize_media(turn())
        assert _ask(engine, turn())
        assert engine.tokenize_media(turn()) == counted
        assert _ask(engine, turn())
        assert sent == [pixels, 0, 0, 0]
        engine.unload()
        engine.load(str(model), CONFIG, projector=load)  # a new child holds nothing
        assert _ask(engine, turn())
        assert sent[-1] == pixels
        sent.clear()
        engine.unload()
        engine.load(str(model), CONFIG, projector=load)
        engine.in_child.add(turn().media[0].key)  # as if the child had let it go for newer pictures
        assert engine.tokenize_media(turn()) == counted
        assert sent == [0, pixels]
    finally:
        engine.close()


def test_the_engine_process_keeps_the_latest_pictures_within_its_limit() -> None:
    from app.engine.media_cache import MediaCache

    cache = MediaCache(limit=10)
    a, b = Media("a", "audio", b"123456"), Media("b", "audio", b"654321")
    whole = cache.whole(MediaPrompt("x", (a,)))
    assert isinstance(whole, MediaPrompt) and whole.media == (a,)
    assert cache.whole(MediaPrompt("x", (a.sent(with_data=False),))) == MediaPrompt("x", (a,))
    assert isinstance(cache.whole(MediaPrompt("x y", (a.sent(with_data=False), b))), MediaPrompt)
    assert a.key not in cache and b.key in cache  # past the limit: the least recently used went first
    assert cache.whole(MediaPrompt("x", (a.sent(with_data=False),))) == [a.key]

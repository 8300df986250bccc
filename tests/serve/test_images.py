"""Images over the API: a data URL in a chat message reaches the projector loaded beside a tiny vision
model (the prompt grows by the image's tokens), and what is no picture, or a URL to fetch, is refused in
words."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.serve import Served, serving
from tests.support.vision import write_picture, write_vision_pair

pytestmark = pytest.mark.llama


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from app.devices import probe_devices
    from app.planning import PlanChoice, plan_source
    from app.session import ModelSession
    from app.vision import projector_for

    model, mmproj = write_vision_pair(tmp_path_factory.mktemp("vision"), "gemma3")
    devices = probe_devices(cpu_only=True)

    def rule(anatomy):
        return projector_for(str(model), anatomy, str(mmproj), None, sees=True), ""

    planned = plan_source(str(model), devices, PlanChoice(n_ctx=2048), projector=rule)
    session = ModelSession(elastic=False)
    session.load(str(model), planned.anatomy, planned.fit, devices)
    try:
        with serving(session, name="tiny") as s:
            yield s
    finally:
        session.close()


def _picture(tmp_path: Path) -> str:
    data = write_picture(tmp_path / "p.png", 96, 64).read_bytes()
    return "data:image/png;base64," + base64.b64encode(data).decode()


def test_an_image_goes_to_the_projector(served: Served, tmp_path: Path) -> None:
    client = served.client()
    words = {"type": "text", "text": "What is in this picture?"}
    plain = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": [words]}], max_tokens=2)
    picture = {"type": "image_url", "image_url": {"url": _picture(tmp_path)}}
    seen = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": [picture, words]}], max_tokens=2
    )
    assert seen.usage.prompt_tokens > plain.usage.prompt_tokens + 8  # the image's tokens (and its marker's place)
    assert served.session.engine.encoded  # the projector encoded it


def test_what_is_no_picture_is_refused(served: Served) -> None:
    client = served.client()
    for url, words in (
        ("data:image/png;base64," + base64.b64encode(b"not a png at all").decode(), "image 1:"),
        ("https://example.com/cat.png", "fetches no URL"),
        ("data:image/png;base64,@@@", "base64 is damaged"),
    ):
        picture = {"type": "image_url", "image_url": {"url": url}}
        with pytest.raises(openai.BadRequestError, match=words):
            client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": [picture]}], max_tokens=2
            )

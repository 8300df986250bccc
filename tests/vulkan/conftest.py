"""The GPU-backend tier: these tests run where llama-cpp-python was built with Vulkan (`bash .ci/vulkan-tier`
builds it on any Debian/Ubuntu machine, on Mesa's software driver lavapipe when there is no GPU); elsewhere
they are skipped, each saying why. Under the tier itself (VRAMCHAT_VULKAN_TIER=1) a missing backend or device
fails the run instead: a tier that skips everything has tested nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.vulkan import vulkan_build

TIER = "VRAMCHAT_VULKAN_TIER"  # set by .ci/vulkan-tier: there, a missing backend or device is a failure


def _missing_backend() -> str | None:
    """Why these tests cannot run here, or None: no Vulkan backend in this llama-cpp-python, or no Vulkan
    device (lavapipe is the package mesa-vulkan-drivers; ggml-vulkan uses a CPU-type device only when
    GGML_VK_VISIBLE_DEVICES names it)."""
    if not vulkan_build():
        return "llama-cpp-python has no Vulkan backend here: bash .ci/vulkan-tier builds one"
    from tests.support.vulkan import vulkan_devices

    if not vulkan_devices():
        return "no Vulkan device: install mesa-vulkan-drivers (lavapipe) and set GGML_VK_VISIBLE_DEVICES=0"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    ours = [item for item in items if str(item.fspath).startswith(here)]
    for item in ours:
        item.add_marker(pytest.mark.vulkan)
    why = _missing_backend() if ours else None
    if why and os.environ.get(TIER):
        raise pytest.UsageError(f"the Vulkan tier cannot run: {why}")
    if why:
        skip = pytest.mark.skip(reason=why)
        for item in ours:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def _vulkan_speed(tmp_path_factory: pytest.TempPathFactory) -> bytes | None:
    """The first Vulkan device's speed, timed once on the device per session (app/speed/vulkan_basis.py), and
    given to every test's home: a plan quotes its speed, and seconds of probing per test would add up."""
    if not vulkan_build():
        return None
    from app.speed import vulkan_basis
    from tests.support.vulkan import vulkan_devices

    home = tmp_path_factory.mktemp("vulkan-speed-home")
    before = os.environ.get("VRAMCHAT_HOME")
    os.environ["VRAMCHAT_HOME"] = str(home)
    try:
        path = vulkan_basis.speed_folder() / vulkan_basis.DEVICES_FILE
        for _ in range(3):  # a probe disturbed by other programs is not kept: timed again
            vulkan_basis.forget()
            vulkan_basis.vulkan_speed(vulkan_devices()[0])
            if path.exists():
                break
        return path.read_bytes() if path.exists() else None
    finally:
        vulkan_basis.forget()
        if before is None:
            os.environ.pop("VRAMCHAT_HOME", None)
        else:
            os.environ["VRAMCHAT_HOME"] = before


@pytest.fixture(autouse=True)
def _home_with_vulkan_speed(_private_home: Path, _vulkan_speed: bytes | None) -> None:
    from app.speed import vulkan_basis

    if _vulkan_speed is not None:
        folder = _private_home / "cache" / vulkan_basis.FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        (folder / vulkan_basis.DEVICES_FILE).write_bytes(_vulkan_speed)

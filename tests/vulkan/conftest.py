"""The GPU-backend tier: these tests run where llama-cpp-python was built with Vulkan (`bash .ci/vulkan-tier`
builds it on any Debian/Ubuntu machine, on Mesa's software driver lavapipe when there is no GPU); elsewhere
they are skipped, each saying why."""

from __future__ import annotations

import os

import pytest

from tests.support.vulkan import vulkan_build


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    ours = [item for item in items if str(item.fspath).startswith(here)]
    for item in ours:
        item.add_marker(pytest.mark.vulkan)
    if ours and not vulkan_build():
        skip = pytest.mark.skip(reason="llama-cpp-python has no Vulkan backend here: bash .ci/vulkan-tier builds one")
        for item in ours:
            item.add_marker(skip)

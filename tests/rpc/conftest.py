"""Two RPC servers lending this machine's CPU on 127.0.0.1, shared by the RPC tests of a session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.rpc.client import rpc_available
from app.rpc.endpoint import Endpoint
from tests.support.rpc import rpc_servers


@pytest.fixture(scope="session")
def rpc_endpoints() -> Iterator[list[Endpoint]]:
    if not rpc_available():
        pytest.fail(
            "this llama-cpp-python was built without the RPC backend: install it with the README's command "
            '(CMAKE_ARGS="-DGGML_RPC=on")',
            pytrace=False,
        )
    with rpc_servers(2) as endpoints:
        yield endpoints

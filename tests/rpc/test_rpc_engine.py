"""The app's side of RPC devices: the dashboard's reading of a remote device, and a server that hangs."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.rpc.endpoint import Endpoint


def test_the_dashboard_reads_a_remote_device_as_probed_plus_the_plan(
    zoo: dict[str, Path], rpc_endpoints: list[Endpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server busy with the engine cannot be asked again: its graph is the probe's figure plus the plan."""
    from app.devices import probe_devices
    from app.devices.live import GpuMemoryReader
    from app.rpc.endpoint import use_endpoints
    from planner.anatomy import load_anatomy
    from planner.config import LoadConfig
    from planner.gguf import read_gguf
    from planner.memory import plan_memory

    monkeypatch.setenv("VRAMCHAT_RPC", "")
    use_endpoints(rpc_endpoints[:1])
    report = probe_devices()
    assert [d.name for d in report.gpus] == ["RPC0"] and report.gpus[0].description == str(rpc_endpoints[0])
    plan = plan_memory(load_anatomy(read_gguf(zoo["llama-f16"])), LoadConfig(n_gpu_layers=99), report.gpus, report.host)
    loaded = [False]
    reader = GpuMemoryReader(report, plan, lambda: loaded[0])
    rpc0 = report.gpus[0]
    assert reader() == {"RPC0": (rpc0.total - rpc0.free, rpc0.total)}
    loaded[0] = True
    assert reader()["RPC0"][0] == rpc0.total - rpc0.free + plan.gpus[0].planned > rpc0.total - rpc0.free


def test_a_server_that_hangs_mid_reply_ends_the_reply_and_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that stops answering without closing the connection (SIGSTOP here) would block
    ggml-rpc for ever: the engine gives up after its stall timeout, and the server is left out."""
    import os
    import signal
    import time

    from app.demo import demo_model_path
    from app.engine.crash import EngineCrashed
    from app.engine.process import EngineProcess
    from app.engine.types import GenerationParams
    from app.rpc.client import drop_unanswering
    from app.rpc.endpoint import configured_endpoints, use_endpoints
    from planner.config import LoadConfig
    from tests.support.rpc import free_port, start_server, wait_until_serving

    monkeypatch.setenv("VRAMCHAT_RPC", "")
    hung = Endpoint("127.0.0.1", free_port())
    server = start_server(hung.port)
    engine = EngineProcess()
    try:
        wait_until_serving(hung, server)
        use_endpoints([hung])
        engine.load(str(demo_model_path()), LoadConfig(n_gpu_layers=99, n_ctx=1024, flash_attn=True))
        engine.stall_timeout, engine.stall_on_rpc = 2.0, True  # as the session sets them for RPC
        pieces = 0
        with pytest.raises(EngineCrashed) as crash:
            for _ in engine.generate("Tell me a very long story.", GenerationParams(max_tokens=4000, temperature=0.8)):
                pieces += 1
                if pieces == 5:
                    os.kill(server.pid, signal.SIGSTOP)
                    stopped = time.monotonic()
        assert time.monotonic() - stopped < 10
        assert crash.value.exit.rpc_failure and "without a token from the RPC servers" in str(crash.value)
        assert drop_unanswering(timeout=1.0) == [hung] and configured_endpoints() == []
    finally:
        engine.close()
        os.kill(server.pid, signal.SIGCONT)
        server.kill()
        server.wait()

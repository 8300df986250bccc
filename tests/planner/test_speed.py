"""The speed formula's parts (planner/speed/) on tiny models and a real-sized header, with fixed figures.

The figures here are made up on purpose (round numbers a test can reason about): what is
tested is the formula, not this machine. bench/speed_predict.py compares it with real runs.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from planner.anatomy import load_anatomy
from planner.fit import Wishes, evaluate, fixed_config, solve
from planner.gguf import read_gguf
from planner.hardware import GiB, Host, parse_bandwidth
from planner.memory import plan_memory
from planner.speed import (
    ENOUGH_REPLIES,
    LEARNED,
    MEASURED,
    MEASURED_BAND,
    TABLE,
    UNKNOWN,
    Calibration,
    CpuSpeed,
    GpuSpeed,
    TokenCost,
    predict,
    predicted_decode,
    token_cost,
)
from planner.speed.timing import prefill_seconds
from planner.units import EXPERT_TENSOR
from planner.weights import HOST_INDEX, weight_buffers
from tests.support.fake_gpus import simulated_gpus
from tests.support.synthetic import llama_like

HOST = Host(32 * GiB, 28 * GiB, frozenset({"avx2"}))
RATES = {t: 20e9 for t in ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K", "q5_K", "q6_K")}
CPU = CpuSpeed(
    threads=2,
    graph_seconds=3e-6,
    op_seconds=0.4e-6,
    decode_rates=RATES,
    prefill_rates={t: 200e9 for t in ("f16", "q8_0", "q4_0", "q5_0", "q4_K", "q6_K")},
    large_factor=0.4,
    read_bandwidth=25e9,
    attention_seconds={"64": 30e-9, "128": 10e-9, "256": 15e-9},
    source="test figures",
)


def _model(zoo: dict[str, Path], name: str):
    return load_anatomy(read_gguf(zoo[name]))


def _plan(model, gpus=(), ngl=None, ctx=4096):
    gpus = list(gpus)
    return evaluate(model, fixed_config(model, gpus, n_gpu_layers=ngl, n_ctx=ctx), gpus, HOST).plan


def _plan_q8(model, ctx=4096):
    """The CPU plan with flash attention and a q8_0 cache."""
    config = fixed_config(model, [], n_ctx=ctx, flash_attn=True, type_k="q8_0", type_v="q8_0")
    return evaluate(model, config, [], HOST).plan


def _placed_bytes(plan, gpus) -> dict[int, int]:
    """Bytes of every tensor per device index, as planner.weights places them (host = HOST_INDEX)."""
    wb = weight_buffers(plan.model, plan.resolved, plan.placement, gpus, frozenset())
    out: dict[int, int] = {}
    tensors = list(plan.model.input_tensors) + list(plan.model.output_tensors) + list(plan.model.other_tensors)
    for layer in plan.model.layers:
        tensors += layer.tensors
    for t in tensors:
        device = wb.tensor_device[t.name]
        out[device] = out.get(device, 0) + t.n_bytes
    return out


def test_bytes_read_per_token_are_the_weights_placed_on_each_device(zoo: dict[str, Path]) -> None:
    model = _model(zoo, "llama-q8_0")  # an output matrix of its own (not tied)
    gpus = simulated_gpus([8 * GiB])
    plan = _plan(model, gpus, ngl=3)  # the output layer and the last two layers on the GPU
    cost = token_cost(plan)
    placed = _placed_bytes(plan, gpus)
    by_name = {d.name: d for d in cost.devices}
    embd = model.tensor("token_embd.weight")
    assert embd is not None
    one_row = embd.n_bytes // embd.shape[1]
    # the GPU reads every weight placed there; the host all of its own but token_embd, of which one row
    assert by_name["CUDA0"].weight_bytes() == placed[0]
    assert by_name["CPU"].weight_bytes() == placed[HOST_INDEX] - embd.n_bytes + one_row
    assert by_name["CUDA0"].layers == 2 and by_name["CPU"].layers == model.n_layer - 2
    # the output matrix is read on the device of the output layer, whole
    output = model.tensor("output.weight")
    assert output is not None and by_name["CUDA0"].output_bytes == output.n_bytes
    # host layers first, then the GPU's: one hand-over, and more where an op the GPU refuses (CUDA's flash
    # attention at this tiny model's head size of 32) runs on the CPU between its layers
    found = plan.ops_on_cpu
    extra = found.splits - found.splits_on_device if found is not None else 0
    assert cost.splits == ["cuda"] * (1 + extra)


def test_tied_embeddings_are_read_whole_as_the_output_matrix(zoo: dict[str, Path]) -> None:
    model = _model(zoo, "ernie4_5")  # output tied to token_embd
    assert model.tied_output
    cost = token_cost(_plan(model))
    (host,) = cost.devices
    embd = model.tensor("token_embd.weight")
    assert embd is not None
    one_row = embd.n_bytes // embd.shape[1]
    layers = sum(layer.weight_bytes for layer in model.layers)
    others = sum(t.n_bytes for t in model.output_tensors + model.other_tensors)
    assert host.weight_bytes() == layers + others + one_row + embd.n_bytes
    assert host.output_bytes == embd.n_bytes


def test_a_tied_output_too_large_for_the_device_is_read_on_the_host_and_a_timed_rate_is_measured(
    zoo: dict[str, Path],
) -> None:
    """lavapipe: a tensor over 128 MiB stays on the host, so the output matmul runs there (the demo's tied
    262k embedding); the device's rate, timed through ggml, is the kernels' own (no spec-sheet efficiency)."""
    import dataclasses

    model = _model(zoo, "ernie4_5")
    embd = model.tensor("token_embd.weight")
    assert model.tied_output and embd is not None
    (card,) = simulated_gpus([8 * GiB], backend="vulkan")
    small = dataclasses.replace(card, max_tensor_bytes=embd.n_bytes - 1)
    every_layer = model.n_layer + 1
    cost = token_cost(_plan(model, [small], ngl=every_layer))
    host, device = cost.devices
    assert device.name == "Vulkan0" and device.output_bytes == 0
    assert host.output_bytes == embd.n_bytes
    roomy = token_cost(_plan(model, [card], ngl=every_layer))
    assert roomy.devices[1].output_bytes == embd.n_bytes  # where the device can run it, it reads it
    timed = predict(cost, CPU, {"Vulkan0": GpuSpeed("Vulkan0", 100e9, "timed on the device", measured=True)})
    table = predict(cost, CPU, {"Vulkan0": GpuSpeed("Vulkan0", 100e9, "a spec sheet")})
    assert timed.decode_start.basis == MEASURED and table.decode_start.basis == TABLE
    assert timed.decode_start.value > table.decode_start.value


def test_a_mixture_of_experts_reads_only_the_experts_the_router_uses(zoo: dict[str, Path]) -> None:
    import re

    model = _model(zoo, "qwen3moe")
    experts = model.moe
    assert experts.n_used < experts.n_expert
    (host,) = token_cost(_plan(model)).devices
    pattern = re.compile(EXPERT_TENSOR)
    expert_bytes = sum(t.n_bytes for layer in model.layers for t in layer.tensors if pattern.search(t.name))
    dense_bytes = sum(t.n_bytes for layer in model.layers for t in layer.tensors if not pattern.search(t.name))
    embd = model.tensor("token_embd.weight")
    assert embd is not None and expert_bytes > 0
    rest = sum(t.n_bytes for t in model.output_tensors + model.other_tensors) + embd.n_bytes // embd.shape[1]
    expected = dense_bytes + expert_bytes * experts.n_used / experts.n_expert + rest
    assert host.weight_bytes() == pytest.approx(expected, abs=len(model.layers) * 3)


def test_shared_experts_count_whole(zoo: dict[str, Path]) -> None:
    import re

    model = _model(zoo, "granitemoe-shared")
    shared = sum(t.n_bytes for layer in model.layers for t in layer.tensors if "_shexp" in t.name)
    assert shared > 0
    pattern = re.compile(EXPERT_TENSOR)
    experts = sum(t.n_bytes for layer in model.layers for t in layer.tensors if pattern.search(t.name))
    (host,) = token_cost(_plan(model)).devices
    dense = sum(t.n_bytes for layer in model.layers for t in layer.tensors if not pattern.search(t.name))
    embd = model.tensor("token_embd.weight")
    assert embd is not None
    rest = sum(t.n_bytes for t in model.output_tensors + model.other_tensors) + embd.n_bytes // embd.shape[1]
    if model.tied_output:
        rest += embd.n_bytes
    share = model.moe.n_used / model.moe.n_expert
    assert host.weight_bytes() == pytest.approx(dense + experts * share + rest, abs=len(model.layers) * 3)


def test_the_kv_cache_is_read_up_to_the_fill_and_a_window_at_most(zoo: dict[str, Path]) -> None:
    model = _model(zoo, "gemma3")  # sliding-window layers beside full-context ones
    cost = token_cost(_plan(model, ctx=8192))
    assert cost.cells == 8192 and 0 < cost.cells_swa < 8192
    assert cost.cells_at(0) == (256, 256)  # llama.cpp pads the cells attention reads to 256
    assert cost.cells_at(1000) == (1024, min(1024, cost.cells_swa))
    full, swa = cost.cells_at(8192)
    assert full == 8192 and swa == cost.cells_swa
    speeds = [predicted_decode(cost, fill, CPU, {}) or 0 for fill in (0, 1024, 4096, 8192)]
    assert speeds == sorted(speeds, reverse=True) and speeds[0] > speeds[-1]


def test_the_graph_operations_are_counted_on_the_graph_llama_cpp_builds(zoo: dict[str, Path]) -> None:
    cost = token_cost(_plan(_model(zoo, "llama-f16")))
    assert cost.ops_exact and not cost.notes
    (host,) = cost.devices
    # a few dozen operations a layer, no views or reshapes (they cost nothing)
    assert 10 * host.layers < host.ops < 60 * host.layers


def test_each_mat_mul_costs_its_own_synchronisation_in_decode_and_in_each_prompt_batch(zoo: dict[str, Path]) -> None:
    """A tiny model's token is a fifth mat-mul overhead (its input converted to the weights' dot type, a second
    wait for the threads): the llama zoo model's decode was predicted 35% fast without it."""
    from dataclasses import replace

    cost = token_cost(_plan(_model(zoo, "llama-f16")))
    (host,) = cost.devices
    # q, k, v, the attention output, gate, up and down in each of 4 layers, and the output matrix
    assert host.mat_muls == 7 * host.layers + 1
    synced = replace(CPU, mat_mul_seconds=1e-6)
    plain, slower = predicted_decode(cost, 0, CPU, {}), predicted_decode(cost, 0, synced, {})
    assert plain is not None and slower is not None
    assert 1 / slower - 1 / plain == pytest.approx(host.mat_muls * 1e-6, rel=1e-6)
    # a prompt pays it once a batch (the engine's micro-batch)
    batches = 3
    tokens = batches * cost.n_ubatch
    fast, slow = prefill_seconds(cost, tokens, 0, CPU).seconds, prefill_seconds(cost, tokens, 0, synced).seconds
    assert fast is not None and slow is not None
    assert slow - fast == pytest.approx(batches * host.mat_muls * 1e-6, rel=1e-6)
    # a cost kept before it was counted reads as none (a plan-cache summary of an older version)
    kept = cost.to_json()
    for device in kept["devices"]:
        del device["mat_muls"]
    assert TokenCost.from_json(kept).devices[0].mat_muls == 0


def test_a_gpu_with_a_bandwidth_is_predicted_and_more_layers_there_are_faster() -> None:
    model = llama_like()  # 4.9 GB of weights
    gpus = simulated_gpus([24 * GiB])
    speeds = {"CUDA0": GpuSpeed("CUDA0", 1008e9, "given for a what-if card")}
    results = {}
    for ngl in (0, 16, 33):
        plan = _plan(model, gpus, ngl=ngl, ctx=8192)
        results[ngl] = predict(token_cost(plan), CPU, speeds)
    assert results[0].decode_start.value < results[16].decode_start.value < results[33].decode_start.value
    full = results[33]
    assert full.decode_start.basis == TABLE  # a card's bandwidth is not measured here
    # every layer on the card: bandwidth x efficiency over the bytes a token reads bounds the speed
    (gpu,) = [d for d in full.devices if d.name == "CUDA0"]
    assert full.decode_start.value < 1008e9 / gpu.bytes_per_token


def test_a_what_if_card_without_a_bandwidth_gets_no_figure_only_words() -> None:
    model = llama_like()
    gpus = simulated_gpus([24 * GiB])
    plan = _plan(model, gpus, ngl=33, ctx=8192)
    why = "a what-if card with no memory bandwidth given (add bw=...)"
    p = predict(token_cost(plan), CPU, {"CUDA0": GpuSpeed("CUDA0", None, why)})
    assert p.decode_start.value is None and p.decode_start.basis == UNKNOWN and p.basis == UNKNOWN
    assert "bw=" in p.decode_start.text() and "tok/s" not in p.decode_start.text()
    assert p.to_json()["decode_start"]["tokens_per_second"] is None
    # a GPU's arithmetic rate is not known: no prefill figure either, and it says why
    assert p.prefill.value is None and "GPU" in p.prefill.note


def test_a_prompt_llama_cpp_hands_to_the_gpu_gets_no_cpu_price(zoo: dict[str, Path]) -> None:
    """No layer on the GPU, but llama.cpp's op offload (on by default) runs a prompt's batches of 32 tokens
    or more on it: a lent H200 read the demo's 512-token prompt at 8,782 tok/s that way, where the CPU's
    price said 1,178. The prefill figure says why it has none; a decode (one token) stays the CPU's, and so
    does a prompt's price where op offload is off, or over RPC (ggml-rpc offloads nothing)."""
    from dataclasses import replace

    from planner.speed.timing import prefill_seconds

    model = _model(zoo, "llama-f16")
    gpus = simulated_gpus([24 * GiB])
    config = fixed_config(model, gpus, n_gpu_layers=0, n_ctx=4096)
    cost = token_cost(evaluate(model, config, gpus, HOST).plan)
    assert [d.name for d in cost.devices] == ["CPU"] and cost.prompt_offload == ["CUDA0"]
    p = predict(cost, CPU)
    assert p.prefill.value is None and "CUDA0" in p.prefill.note and "op offload" in p.prefill.note
    assert p.decode_start.value and p.decode_start.basis == MEASURED
    assert prefill_seconds(cost, 31, 0, CPU).seconds  # a batch under 32 tokens stays on the CPU
    no_offload = token_cost(evaluate(model, replace(config, op_offload=False), gpus, HOST).plan)
    assert not no_offload.prompt_offload and predict(no_offload, CPU).prefill.value
    (server,) = simulated_gpus([24 * GiB], backend="rpc")
    over_rpc = token_cost(evaluate(model, fixed_config(model, [server], n_gpu_layers=0), [server], HOST).plan)
    assert not over_rpc.prompt_offload and predict(over_rpc, CPU).prefill.value
    # a cost kept before the field existed reads back as none
    kept = cost.to_json()
    del kept["prompt_offload"]
    assert TokenCost.from_json(kept).prompt_offload == []


def test_a_measured_prediction_is_a_range_never_a_bare_number(zoo: dict[str, Path]) -> None:
    p = predict(token_cost(_plan(_model(zoo, "llama-f16"))), CPU)
    f = p.decode_start
    assert f.basis == MEASURED and f.low < f.value < f.high
    assert f.low == pytest.approx(f.value * (1 - MEASURED_BAND)) and f.high == pytest.approx(
        f.value * (1 + MEASURED_BAND)
    )
    assert "–" in f.text() and "measured" in f.text()
    assert p.prefill.value and p.prefill.basis == MEASURED


def test_no_cpu_figures_means_unknown_with_the_reason(zoo: dict[str, Path]) -> None:
    p = predict(token_cost(_plan(_model(zoo, "llama-f16"))), None)
    assert p.decode_start.value is None and p.basis == UNKNOWN
    assert "not measured" in p.decode_start.note


def test_replies_move_the_prediction_and_narrow_its_range(zoo: dict[str, Path]) -> None:
    cost = token_cost(_plan(_model(zoo, "llama-f16")))
    raw = predict(cost, CPU).decode_start
    widths = []
    ratios: list[float] = []
    for ratio in (0.80, 0.84, 0.78, 0.82, 0.81):
        ratios.append(ratio)
        f = predict(cost, CPU, calibration=Calibration(tuple(ratios))).decode_start
        assert f.basis == LEARNED and f.replies == len(ratios)
        assert f.value == pytest.approx(raw.value * sorted(ratios)[len(ratios) // 2] if len(ratios) % 2 else f.value)
        widths.append((f.high - f.low) / f.value)
    assert widths == sorted(widths, reverse=True) and widths[-1] < widths[0]
    assert widths[0] < (raw.high - raw.low) / raw.value  # one reply already beats the unlearned band
    last = predict(cost, CPU, calibration=Calibration(tuple(ratios))).decode_start
    assert last.value == pytest.approx(raw.value * 0.81)
    assert len(ratios) >= ENOUGH_REPLIES and last.text().startswith("≈") and "learned from 5 replies" in last.text()


def test_a_prediction_survives_the_plan_cache_as_json(zoo: dict[str, Path]) -> None:
    cost = token_cost(_plan(_model(zoo, "gemma3")))
    again = TokenCost.from_json(cost.to_json())
    assert again.to_json() == cost.to_json()
    assert predict(again, CPU).to_json() == predict(cost, CPU).to_json()


def test_the_json_contract(zoo: dict[str, Path]) -> None:
    data = predict(token_cost(_plan(_model(zoo, "llama-f16"), ctx=4096)), CPU).to_json()
    assert data["basis"] in ("measured", "learned", "table", "unknown")
    for key, extra in (
        ("decode_start", "context_tokens"),
        ("decode_full", "context_tokens"),
        ("prefill", "prompt_tokens"),
    ):
        figure = data[key]
        assert set(figure) >= {"tokens_per_second", "low", "high", "basis", "replies", "note", extra}
        assert figure["low"] <= figure["tokens_per_second"] <= figure["high"]
    assert data["decode_start"]["context_tokens"] == 0 and data["decode_full"]["context_tokens"] == 4096
    (device,) = data["devices"]
    assert device["name"] == "CPU" and device["bytes_per_token"] > 0 and device["seconds_per_token"] > 0


def test_bandwidths_are_read_in_spec_sheet_units() -> None:
    assert parse_bandwidth("1008GB/s") == 1008e9
    assert parse_bandwidth("3.35 TB/s") == pytest.approx(3.35e12)
    assert parse_bandwidth("448") == 448e9
    assert parse_bandwidth("100GiB/s") == 100 * GiB
    for bad in ("fast", "-5GB/s", "12 furlongs"):
        with pytest.raises(ValueError):
            parse_bandwidth(bad)


def _speed_oracle(gpus):
    speeds = {d.name: GpuSpeed(d.name, 900e9, "test") for d in gpus}
    return lambda plan: predict(token_cost(plan), CPU, speeds).decode_start.value


def test_min_speed_trades_context_for_layers_on_the_gpu() -> None:
    model = llama_like()
    gpus = simulated_gpus([5 * GiB])  # less than the weights (4.9 GB) and what every layer needs beside
    oracle = _speed_oracle(gpus)
    plain = solve(model, gpus, HOST, Wishes(n_ctx=65536))
    assert plain.verdict == "partial_gpu"
    slow = oracle(plain.plan)
    assert slow is not None
    wish = slow * 1.5
    faster = solve(model, gpus, HOST, Wishes(n_ctx=65536, min_speed=wish, decode_speed=oracle))
    assert faster.plan.fits and faster.plan.layers_on_gpu > plain.plan.layers_on_gpu
    assert faster.plan.resolved.n_ctx < plain.plan.resolved.n_ctx
    got = oracle(faster.plan)
    assert got is not None and got >= wish
    assert any("--min-speed" in str(r) and "layers on the GPU" in str(r) for r in faster.reasons)
    # the fewest layers that reach the wish: one layer fewer would not
    fewer = plan_memory(model, faster.plan.config.with_(n_gpu_layers=faster.plan.layers_on_gpu - 1), gpus, HOST)
    assert (oracle(fewer) or 0) < wish


def test_min_speed_that_nothing_meets_keeps_the_plan_and_says_so() -> None:
    model = llama_like()
    gpus = simulated_gpus([5 * GiB])
    oracle = _speed_oracle(gpus)
    plain = solve(model, gpus, HOST, Wishes(n_ctx=65536))
    wished = solve(model, gpus, HOST, Wishes(n_ctx=65536, min_speed=1e6, decode_speed=oracle))
    assert wished.plan.config == plain.plan.config
    note = next(str(r) for r in wished.reasons if "--min-speed" in str(r))
    assert "nothing that fits decodes that fast" in note and "the fastest that fits" in note


def test_min_speed_already_met_changes_nothing(zoo: dict[str, Path]) -> None:
    model = _model(zoo, "llama-f16")
    plain = solve(model, [], HOST)
    wished = solve(model, [], HOST, Wishes(min_speed=1.0, decode_speed=lambda p: 100.0))
    assert wished.plan.config == plain.plan.config
    assert any("decodes about 100 tok/s" in str(r) for r in wished.reasons)


def test_the_cache_factor_is_geometric_between_the_probe_sizes() -> None:
    from planner.speed.machine import LARGE_SET, SMALL_SET

    assert CPU.cache_factor(SMALL_SET) == 1.0 and CPU.cache_factor(10 * LARGE_SET) == CPU.large_factor
    middle = math.sqrt(SMALL_SET * LARGE_SET)
    assert CPU.cache_factor(int(middle)) == pytest.approx(math.sqrt(CPU.large_factor), rel=1e-3)


def test_the_gpu_figures_meet_the_decodes_recorded_on_an_h100(gemma_path: Path, tmp_path: Path) -> None:
    """The table figures (GPU_EFFICIENCY, GPU_OP_SECONDS) against the lent H100's record: every run with
    all layers on the GPU, its bandwidth as NVML gives an H100 SXM (2,619 MHz x 2 x 5,120 bit).
    The record's loop calls llama_decode alone: the sampler and the engine's own loop are left out.
    The two constants were fitted to two of these runs: this holds them to all the others too."""
    from planner.speed.timing import ENGINE_TOKEN_SECONDS, decode_seconds
    from tests.support.gpu_record import DATA, load_record, record_gpu
    from tests.support.header_clone import write

    record = load_record()
    paths = {
        "gemma3-270m": str(gemma_path),
        "llama-8b-shape": str(write(DATA / "llama-8b-shape.header.json.gz", tmp_path / "big.gguf", sparse=True)),
    }
    gpu = record_gpu(record)
    speeds = {gpu.name: GpuSpeed(gpu.name, 2619e6 * 2 * 5120 / 8, "H100 SXM spec")}
    checked = 0
    for run in record["nvml"] + record["nvml_check"]:
        spec = run["spec"] if isinstance(run["spec"], dict) else None
        if spec is None or spec.get("model", "").rsplit("/", 1)[-1].removesuffix(".gguf") not in (
            "gemma3-270m",
            "llama-8b-shape",
        ):
            continue
        name = spec["model"].rsplit("/", 1)[-1].removesuffix(".gguf")
        steps = {s["step"]: s for s in run.get("steps", [])}
        if "generation" not in steps or "prompt" not in steps:
            continue
        model = load_anatomy(read_gguf(paths[name]))
        if spec["ngl"] <= model.n_layer:
            continue  # the host's share ran on that machine's CPU, which no probe here measured
        config = fixed_config(
            model, [gpu], n_ctx=spec["n_ctx"], flash_attn=spec["flash_attn"], swa_full=spec.get("swa_full")
        )
        plan = plan_memory(model, config, [gpu], HOST)
        cost = token_cost(plan)
        gen, prompt = spec.get("gen", 2000), spec.get("prompt", 512)
        measured = (steps["generation"]["t"] - steps["prompt"]["t"]) / gen
        predicted = decode_seconds(cost, prompt + gen // 2, CPU, speeds).seconds
        assert predicted is not None
        predicted -= ENGINE_TOKEN_SECONDS + CPU.sampler_seconds(cost.n_vocab)
        assert predicted == pytest.approx(measured, rel=0.1), (name, spec)  # within 6% when this was written
        checked += 1
    assert checked >= 6


def test_sampling_a_token_costs_what_this_cpu_timed_per_vocabulary_entry(gemma_path: Path) -> None:
    """The demo's 262,144-entry vocabulary: the sampler chain a token is n_vocab x the probe's figure (a lent
    Xeon's 8.6 ns against this EPYC's 3.7: 1.3 ms more a token, a fifth of the demo's decode there); a probe
    that did not time it falls back to the table's figure. On a GPU too: the chain runs on the CPU."""
    from dataclasses import replace

    from planner.speed.machine import SAMPLER_SECONDS_PER_ENTRY
    from planner.speed.timing import decode_seconds

    model = load_anatomy(read_gguf(gemma_path))
    cost = token_cost(_plan(model))
    assert cost.n_vocab == 262_144
    fast, slow = replace(CPU, sampler_entry_seconds=3.7e-9), replace(CPU, sampler_entry_seconds=8.6e-9)
    seconds = {cpu.sampler_entry_seconds: decode_seconds(cost, 512, cpu, {}).seconds for cpu in (fast, slow, CPU)}
    assert seconds[8.6e-9] - seconds[3.7e-9] == pytest.approx(262_144 * 4.9e-9, rel=1e-6)
    assert seconds[0.0] - seconds[3.7e-9] == pytest.approx(262_144 * (SAMPLER_SECONDS_PER_ENTRY - 3.7e-9), rel=1e-6)
    (gpu,) = simulated_gpus([24 * GiB])
    on_gpu = token_cost(_plan(model, [gpu], ngl=model.n_layer + 1))
    speeds = {gpu.name: GpuSpeed(gpu.name, 1e12, "test")}
    gpu_seconds = [decode_seconds(on_gpu, 512, cpu, speeds).seconds for cpu in (fast, slow)]
    assert gpu_seconds[1] - gpu_seconds[0] == pytest.approx(262_144 * 4.9e-9, rel=1e-6)


def test_rows_streamed_from_memory_cost_a_latency_each_and_not_in_cache(zoo: dict[str, Path]) -> None:
    model = _model(zoo, "llama-q8_0")
    cost = token_cost(_plan(model))
    host = cost.devices[0]
    # every matrix row a token reads: the layers' (n_embd wide and n_ff wide) and the output's n_vocab rows
    assert host.output_rows == model.n_vocab and host.rows > host.output_rows
    from dataclasses import replace

    slow_rows = replace(CPU, row_seconds=50e-9)
    tiny = predicted_decode(cost, 0, CPU, {})
    assert tiny is not None and predicted_decode(cost, 0, slow_rows, {}) == pytest.approx(tiny)  # in cache
    big = replace(cost, devices=[replace(host, weights={"q8_0": 512 << 20})])  # the same rows beyond any cache
    plain, rowed = predicted_decode(big, 0, CPU, {}), predicted_decode(big, 0, slow_rows, {})
    assert plain is not None and rowed is not None
    assert 1 / rowed - 1 / plain == pytest.approx(host.rows * 50e-9, rel=1e-6)


def test_a_prompt_shorter_than_a_tile_pays_decode_attention_and_a_longer_one_the_tiles_its_queries_see(
    zoo: dict[str, Path],
) -> None:
    """ggml-cpu's tiled flash attention (a batch of 64 queries or more) converts the mask of every 64-cell tile
    of the view but computes only the tiles a 64-query tile can see: a 512-token prompt from the start 36 of
    its 64 tiles (2 EPYC cores, 32 wide: 1.70 ms, 2.61 with every cell shown). Priced over the whole view,
    the demo's prompts and the wide models' were planned 20-38% slow."""
    from dataclasses import replace

    from planner.speed.cost import KV_PAD
    from planner.speed.timing import FA_TILE_QUERIES, TiledBatch, prefill_seconds

    # the tiles a prompt's batch computes, and the mask cells it converts, per query head
    assert TiledBatch(512, 0, 512).cells() == (36 * 64 * 64, 512 * 512)
    assert TiledBatch(1280, 1024, 64).cells() == (17 * 64 * 64, 64 * 1280)  # late in a chat: all but its future
    assert TiledBatch(1024, 1024, 512, window=512).cells()[0] == 8 * 9 * 64 * 64  # a window: itself and its batch
    assert TiledBatch(256, 0, 100).cells() == (2 * 64 * 64 + 64 * 64, 100 * 256)  # a part tile runs whole
    # the threads take chunks of rows in turn: a head's later queries weigh more, and the threads end apart
    # (one thread: its share is everything; an even batch: an even share)
    late = TiledBatch(1024, 512, 512)
    assert late.seconds(4, 1, 1.0, 0.0) == 4 * late.cells()[0]
    assert 1.1 < late.seconds(4, 2, 1.0, 0.0) / (4 * late.cells()[0]) < 1.2
    assert TiledBatch(64, 0, 128).seconds(4, 2, 1.0, 0.0) == 4 * TiledBatch(64, 0, 128).cells()[0]
    # chunks shorter than a tile (many threads, few heads) still compute whole tiles: twice the work here
    assert TiledBatch(64, 0, 64).seconds(4, 2, 1.0, 0.0) == 2 * 4 * TiledBatch(64, 0, 64).cells()[0]

    cost = token_cost(_plan(_model(zoo, "qwen3-hd"), ctx=8192))  # 4 query heads of width 64
    base = replace(CPU, attention_seconds={"64": 0.0}, prefill_attention_seconds={"64": 0.0})
    short, long = FA_TILE_QUERIES - 1, 4 * FA_TILE_QUERIES

    def attention(n: int, start: int, one_by_one: float, tiled: float, hidden: float = 0.0) -> float:
        cpu = replace(
            base,
            attention_seconds={"64": one_by_one},
            prefill_attention_seconds={"64": tiled},
            prefill_hidden_cell_seconds=hidden,
        )
        with_attention = prefill_seconds(cost, n, start, cpu).seconds
        without = prefill_seconds(cost, n, start, base).seconds
        assert with_attention is not None and without is not None
        return with_attention - without

    heads = cost.devices[0].attn_heads["64"]
    # one query at a time, as decode: each token over the cells before it
    assert attention(short, 100, 1e-9, 1.0) == pytest.approx(short * heads * (100 + (short + 1) / 2) * 1e-9)
    # tiled: the tiles each query tile sees at the visible cell's cost (which includes converting its mask),
    # every tile of the view at the mask's; the view is the cells in use padded to 256
    view = math.ceil((100 + long) / KV_PAD) * KV_PAD
    batch = TiledBatch(view, 100, long)
    computed, masked = batch.cells()
    assert computed == (3 + 4 + 5 + 6) * 64 * 64 and masked == long * view
    layers = sum(cost.devices[0].attn_layouts.values())
    one_layer = batch.seconds(heads // layers, CPU.threads, 1e-9, 0.0)
    assert heads * computed * 1e-9 <= layers * one_layer < 1.2 * heads * computed * 1e-9
    assert attention(long, 100, 1.0, 1e-9) == pytest.approx(layers * one_layer)
    assert attention(long, 100, 1.0, 1e-9, hidden=0.2e-9) == pytest.approx(
        layers * batch.seconds(heads // layers, CPU.threads, 0.8e-9, 0.2e-9)
    )


def test_a_prompt_of_a_few_tokens_reads_its_weights_at_least_once(zoo: dict[str, Path]) -> None:
    """A batch under 32 tokens costs a token's mat-vec over its weights, and from there a straight line to
    the 32-token batch: priced at the 32-token rate alone, the demo's one-token prompt was planned at 8.0 ms
    where llama.cpp took 12.6 (10.2 so planned), and 8 tokens at 14.0 against 17.6 (15.7)."""
    from planner.speed.machine import SHORT_BATCH
    from planner.speed.timing import batch_mat_mul_seconds

    d = token_cost(_plan(_model(zoo, "llama-q8_0"))).devices[0]
    read = (d.weights["q8_0"] - (d.output_bytes if d.output_type == "q8_0" else 0)) / CPU.decode_rate(
        "q8_0", d.weight_bytes()
    )[0]
    at_short = 2.0 * d.params["q8_0"] * SHORT_BATCH / CPU.prefill_rate("q8_0", 0.0, SHORT_BATCH, d.weight_bytes())[0]
    assert read > 0 and at_short > read
    assert batch_mat_mul_seconds(d, CPU, "q8_0", 1) == pytest.approx(read)
    assert batch_mat_mul_seconds(d, CPU, "q8_0", 16) == pytest.approx(read + 15 / 31 * (at_short - read))
    assert batch_mat_mul_seconds(d, CPU, "q8_0", SHORT_BATCH) == pytest.approx(at_short, rel=0.01)
    assert batch_mat_mul_seconds(d, CPU, "q8_0", 64) > batch_mat_mul_seconds(d, CPU, "q8_0", SHORT_BATCH)


def test_decode_attends_to_the_cells_in_use_and_skips_the_rest_of_the_padded_view(zoo: dict[str, Path]) -> None:
    from dataclasses import replace

    cost = token_cost(_plan(_model(zoo, "qwen3-hd")))  # 4 query heads of width 64, a 4,096-cell cache
    free = replace(CPU, attention_seconds={"64": 0.0}, hidden_cell_seconds=0.0)
    heads = cost.devices[0].attn_heads["64"]

    def attention(fill: int, cell: float, hidden: float) -> float:
        timed = predicted_decode(
            cost, fill, replace(CPU, attention_seconds={"64": cell}, hidden_cell_seconds=hidden), {}
        )
        bare = predicted_decode(cost, fill, free, {})
        assert timed and bare
        return 1 / timed - 1 / bare

    # 40 tokens in a view padded to 256 cells: 40 attended to, 216 hidden by the mask and skipped
    assert attention(40, 10e-9, 0.0) == pytest.approx(heads * 40 * 10e-9)
    assert attention(40, 0.0, 1e-9) == pytest.approx(heads * 216 * 1e-9)


def test_decode_over_a_long_view_waits_for_the_thread_whose_slice_holds_the_most_cells_in_use(
    zoo: dict[str, Path],
) -> None:
    """From 512 cells ggml splits a lone query's attention by cells (ggml-cpu/ops.cpp `use_split_kv_path`):
    with 1,100 tokens in a view of 1,280 the first of 2 threads attends to 640 and the second to 460, and
    the token waits for the first (measured on 2 cores: 22.8 ns a cell-head against 20.4 with the view
    full, 39.9 with 1,100 of 4,096 in use)."""
    from dataclasses import replace

    cost = token_cost(_plan(_model(zoo, "qwen3-hd")))  # an f16 cache
    heads = cost.devices[0].attn_heads["64"]

    def attention(fill: int, threads: int) -> float:
        cpu = replace(CPU, threads=threads, hidden_cell_seconds=0.0)
        timed = predicted_decode(cost, fill, replace(cpu, attention_seconds={"64": 10e-9}), {})
        bare = predicted_decode(cost, fill, replace(cpu, attention_seconds={"64": 0.0}), {})
        assert timed and bare
        return 1 / timed - 1 / bare

    assert attention(1100, 1) == pytest.approx(heads * 1100 * 10e-9)
    assert attention(1100, 2) == pytest.approx(heads * 2 * 640 * 10e-9)
    assert attention(1100, 4) == pytest.approx(heads * 4 * 320 * 10e-9)  # the first slice all in use
    # under 512 cells the heads are split instead: each thread's share as full as the others'
    assert attention(200, 2) == pytest.approx(heads * 200 * 10e-9)
    # a quantized cache is never split by cells
    q8 = token_cost(_plan_q8(_model(zoo, "qwen3-hd")))
    cpu = replace(CPU, threads=2, hidden_cell_seconds=0.0)
    timed = predicted_decode(q8, 1100, replace(cpu, attention_seconds={"64": 10e-9}), {})
    bare = predicted_decode(q8, 1100, replace(cpu, attention_seconds={"64": 0.0}), {})
    assert timed and bare and 1 / timed - 1 / bare == pytest.approx(heads * 1100 * 10e-9)


def test_a_cache_from_memory_costs_each_layer_the_probes_figure_for_its_width_and_kv_heads(
    zoo: dict[str, Path],
) -> None:
    """An 8B's weights pass through the CPU's caches between its layers, so each layer's KV cache comes
    from memory: every cell read costs the layer what the probe timed for that head width and KV head
    count (how far apart one head's rows lie decides how well the CPU prefetches them; measured on 2
    cores, 128 wide: 8 KV heads 40 ns a cell and query head, 2 KV heads 11, 9 in the caches). A tiny
    model's whole working set stays in the caches and pays none of it."""
    from dataclasses import replace

    from planner.speed.machine import STREAMED_HEADS

    extra = {"128": {"1": 1e-9, "2": 2e-9, "4": 10e-9, "8": 30e-9}}
    cpu = replace(CPU, threads=1, hidden_cell_seconds=0.0)

    def added(cost: TokenCost, fill: int) -> float:
        streamed = predicted_decode(cost, fill, replace(cpu, attention_streamed_extra=extra), {})
        cached = predicted_decode(cost, fill, replace(cpu, attention_streamed_extra={"128": {"1": 0.0}}), {})
        assert streamed and cached
        return 1 / streamed - 1 / cached

    for kv_heads, per_head in ((8, 30e-9), (2, 2e-9), (16, 30e-9)):  # beyond the timed counts: the nearest
        cost = token_cost(_plan(llama_like(n_head_kv=kv_heads), ctx=8192))
        assert cost.devices[0].attn_layouts == {f"128/{kv_heads}": 32}
        assert added(cost, 4000) == pytest.approx(32 * 4000 * per_head * STREAMED_HEADS)
    tiny = token_cost(_plan(_model(zoo, "qwen3-hd")))  # 64 wide: the nearest width timed, 128
    assert added(tiny, 3000) == 0.0
    # figures from a probe that did not time it: the attention slowed as the weights, as before
    old = replace(cpu, attention_streamed_extra={})
    cost = token_cost(_plan(llama_like(), ctx=8192))
    assert predicted_decode(cost, 4000, old, {}) != predicted_decode(cost, 4000, replace(old, large_factor=1.0), {})


def test_weights_llama_cpp_repacks_for_this_cpu_are_priced_at_the_rates_timed_repacked(zoo: dict[str, Path]) -> None:
    """On an AVX2 CPU llama.cpp moves q4_0 and q4_K matrices into CPU_REPACK, whose kernels run at other
    rates (2 EPYC cores: a q4_0 mat-vec 32 GB/s plain, 53 repacked; a 32-token q4_K mat-mul 634 GFLOP/s
    plain, 479 repacked): their bytes and products are priced at the probe's repacked rates, and plain
    where the extra buffers are off or the probe did not time them."""
    from dataclasses import replace

    from planner.speed.machine import REPACKED

    model = _model(zoo, "qwen2-q4_0")
    host = token_cost(_plan(model)).devices[0]  # HOST has AVX2
    repacked = host.weights.get("q4_0" + REPACKED, 0)
    assert repacked and "q4_0" not in host.weights and host.params["q4_0" + REPACKED]
    cost = token_cost(_plan(model))
    cpu = replace(CPU, hidden_cell_seconds=0.0)
    plain = predicted_decode(cost, 100, cpu, {})
    fast = predicted_decode(cost, 100, replace(cpu, decode_rates_repacked={"q4_0": 40e9}), {})
    assert plain and fast and 1 / plain - 1 / fast == pytest.approx(repacked / 20e9 - repacked / 40e9)
    off = evaluate(model, fixed_config(model, [], n_ctx=4096, cpu_extra_buffers=False), [], HOST).plan
    loaded_plain = token_cost(off).devices[0].weights
    assert loaded_plain["q4_0"] == repacked and "q4_0" + REPACKED not in loaded_plain
    # a prompt: repacking's gain as timed at 128 tokens and at 32, geometric between
    rates = replace(
        cpu,
        prefill_rates={"q4_0": 100e9},
        prefill_rates_short_batch={"q4_0": 100e9},
        prefill_rates_repacked={"q4_0": 250e9},
        prefill_rates_short_repacked={"q4_0": 200e9},
    )
    assert rates.prefill_rate("q4_0" + REPACKED, 0, 128)[0] == pytest.approx(250e9)
    assert rates.prefill_rate("q4_0" + REPACKED, 0, 32)[0] == pytest.approx(200e9)
    assert rates.prefill_rate("q4_0" + REPACKED, 0, 64)[0] == pytest.approx(250e9 * 0.8**0.5)
    assert rates.prefill_rate("q4_0", 0, 32)[0] == pytest.approx(100e9)
    # a probe that did not time them: the plain rates, and the plan says so
    slow = predict(cost, cpu, {})
    assert any("q4_0 weights run repacked, timed plain" in note for note in slow.notes)


def test_a_prompts_mat_mul_rate_follows_the_matrix_width_and_a_short_batch(zoo: dict[str, Path]) -> None:
    from dataclasses import replace

    cpu = replace(
        CPU,
        prefill_rates={"q8_0": 100e9},  # 4096 wide
        prefill_rates_by_width={"128": {"q8_0": 25e9}, "1024": {"q8_0": 200e9}},
        prefill_rates_short_batch={"q8_0": 50e9},  # 32 tokens, 1024 wide
    )
    assert cpu.prefill_rate("q8_0")[0] == 100e9 and cpu.prefill_rate("q8_0", 4096)[0] == 100e9
    assert cpu.prefill_rate("q8_0", 1024)[0] == pytest.approx(200e9)
    assert cpu.prefill_rate("q8_0", 64)[0] == 25e9  # below the narrowest width timed: its rate
    assert cpu.prefill_rate("q8_0", 256)[0] == pytest.approx(50e9)  # geometric: a third of the way
    assert cpu.prefill_rate("q8_0", 1024, 32)[0] == pytest.approx(50e9)  # a chat turn's batch
    assert cpu.prefill_rate("q8_0", 1024, 64)[0] == pytest.approx(100e9)  # halfway to 128 tokens
    assert cpu.prefill_rate("q8_0", 1024, 512)[0] == pytest.approx(200e9)
    # a real model's weights come from memory for every batch: a short one runs at the rate timed over a
    # matrix no cache holds (the demo's 32-token prompt: its q5_0 mat-muls 22 ms in llama.cpp, 19 at the
    # rate in cache); a model in the caches at the rate in cache, one between them geometrically between
    beyond = replace(cpu, prefill_rates_short_beyond={"q8_0": 25e9})
    assert beyond.prefill_rate("q8_0", 1024, 32, 1 << 30)[0] == pytest.approx(25e9)
    assert beyond.prefill_rate("q8_0", 1024, 32, 4 << 20)[0] == pytest.approx(50e9)
    assert 25e9 < beyond.prefill_rate("q8_0", 1024, 32, 48 << 20)[0] < 50e9
    assert beyond.prefill_rate("q8_0", 1024, 512, 1 << 30)[0] == pytest.approx(200e9)  # a long batch: as before
    # the tiny model's matrices are 128 and 256 wide: its prompt is priced at their rates
    cost = token_cost(_plan(_model(zoo, "llama-q8_0")))
    width = 2 ** (cost.devices[0].params_log_width["q8_0"] / cost.devices[0].params["q8_0"])
    assert 128 < width < 256


def test_the_operations_between_the_mat_muls_are_priced_per_element_by_kind(zoo: dict[str, Path]) -> None:
    from dataclasses import replace

    from planner.speed.timing import prefill_seconds

    llama = token_cost(_plan(_model(zoo, "llama-q8_0"))).devices[0].elements
    gemma = token_cost(_plan(_model(zoo, "gemma3"))).devices[0].elements
    # a rotary embedding of queries and keys, norms, and a SiLU gate priced as plain; Gemma's GELU gate apart
    assert llama["rope"] > 0 and llama["norm"] > 0 and llama["plain"] > 0 and "gelu" not in llama
    assert gemma["gelu"] > 0
    cost = token_cost(_plan(_model(zoo, "gemma3")))
    free = replace(CPU, elementwise_seconds={})
    priced = replace(CPU, elementwise_seconds={"gelu": 1e-9, "plain": 0.0, "rope": 0.0, "norm": 0.0})
    with_gelu, without = prefill_seconds(cost, 100, 0, priced).seconds, prefill_seconds(cost, 100, 0, free).seconds
    assert with_gelu is not None and without is not None
    assert with_gelu - without == pytest.approx(100 * gemma["gelu"] * 1e-9)


def test_a_device_timed_per_weight_type_and_per_operation_is_priced_so(zoo: dict[str, Path]) -> None:
    (card,) = simulated_gpus([8 * GiB], backend="vulkan")
    model = _model(zoo, "llama-q4_k")
    cost = token_cost(_plan(model, [card], ngl=model.n_layer + 1))
    device = next(d for d in cost.devices if not d.is_host)
    plain = GpuSpeed(card.name, 2e9, "timed", measured=True)
    timed = GpuSpeed(
        card.name,
        2e9,
        "timed",
        measured=True,
        type_rates={"f16": 2e9, "q4_K": 0.5e9},
        op_seconds=20e-6,
        graph_seconds=1e-4,
    )
    at_plain, at_timed = (
        predicted_decode(cost, 0, CPU, {card.name: plain}),
        predicted_decode(cost, 0, CPU, {card.name: timed}),
    )
    assert at_plain and at_timed and at_timed < at_plain
    # a q4_K byte at its own rate (q6_K, not timed, at q4_K's: the nearest), every operation at the device's cost
    extra = sum(n / 0.5e9 - n / 2e9 for t, n in device.weights.items() if t in ("q4_K", "q6_K"))
    extra += device.ops * (20e-6 - 1.5e-6) + (1e-4 - 150e-6)
    assert 1 / at_timed - 1 / at_plain == pytest.approx(extra, rel=1e-6)

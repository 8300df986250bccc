"""`--gpu "RTX 4090"`: plan for cards you do not have, from the card table (planner.cards).

Each card becomes a device as llama.cpp would list it (CUDA0, CUDA1, ROCm0, MTL0), all of its
memory free, with its SMs, threads per SM, compute capability or gfx target and bandwidth, so the
backend's own overhead is the card's (planner.gpu_overhead), not this machine's. An Apple chip's GPU
shares its unified memory: the host becomes that Mac's RAM unless --ram says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.cards import Card, UnknownCard, card_device, find_card
from planner.hardware import Device, Host, format_size
from planner.units import DEVICE_PREFIX


class WhatIfError(ValueError):
    """A --gpu list that names no known card, or cards no single llama.cpp build can drive together."""


def cards_for(names: Sequence[str]) -> list[Card]:
    """The cards `--gpu` names (each flag one card; "2x RTX 3090" for two of them)."""
    cards: list[Card] = []
    for raw in names:
        text = raw.strip()
        count = 1
        head, _, rest = text.partition(" ")
        if head.lower().endswith("x") and head[:-1].isdigit() and rest:
            count, text = int(head[:-1]), rest
        if not 1 <= count <= 16:
            raise WhatIfError(f"--gpu {raw!r}: between 1x and 16x cards")
        try:
            card = find_card(text)
        except UnknownCard as exc:
            raise WhatIfError(f"--gpu: {exc}") from None
        cards += [card] * count
    backends = {c.backend for c in cards}
    if len(backends) > 1:
        raise WhatIfError(
            "--gpu: one llama.cpp build drives one kind of GPU (CUDA, ROCm or Metal); these cards need "
            + ", ".join(sorted(backends))
        )
    if backends == {"metal"} and len(cards) > 1:
        raise WhatIfError("--gpu: a Mac has one GPU")
    return cards


def devices_for(cards: Sequence[Card]) -> list[Device]:
    return [card_device(c, i, f"{DEVICE_PREFIX.get(c.backend, 'GPU')}{i}") for i, c in enumerate(cards)]


def host_for(cards: Sequence[Card], host: Host) -> Host:
    """An Apple chip's Mac: its unified memory is the host's RAM (nothing else running)."""
    apple = [c for c in cards if c.backend == "metal"]
    if not apple:
        return host
    ram = apple[0].memory
    return Host(ram, ram, host.cpu_features, 0, simulated=True)


def describe(cards: Sequence[Card]) -> str:
    return ", ".join(
        f"{c.name} ({format_size(c.total)}{' working set' if c.backend == 'metal' else ''}, "
        f"{c.sm_count} {'SMs' if c.backend == 'cuda' else 'CUs' if c.backend == 'rocm' else 'GPU cores'})"
        for c in cards
    )

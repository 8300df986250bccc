"""Common GPUs, for planning on a card you do not have (`--gpu "RTX 4090"`) and for naming a probed one.

Each card carries what the planner needs to price it: its memory, its SMs (NVIDIA) or compute units
(AMD) or GPU cores (Apple), the most threads resident on one SM (the CUDA context grows with both:
planner.gpu_overhead), its compute capability or gfx target (which matrix-multiply paths ggml-cuda
takes: planner.cuda_paths), its backend and its memory bandwidth (bytes/s, the ceiling on decode
speed). Figures are the vendors' own spec pages and whitepapers, cited per family below; the
threads per SM come from the CUDA C++ Programming Guide's table "Technical Specifications per
Compute Capability" (2,048 for 6.x, 7.0, 8.0, 9.0, 10.0; 1,024 for 7.5; 1,536 for 8.6, 8.9, 12.0).
SM counts are the CUDA cores the spec page lists divided by the cores per SM of the architecture
(64 for P100, Volta, Turing and A100; 128 for Pascal GeForce, Ampere GeForce, Ada, Hopper and
Blackwell), as the architecture whitepapers give them.

What llama.cpp sees as a card's total is less than its nominal memory: NVML's total includes a
driver reserve that cudaMemGetInfo leaves out (450-640 MiB; 3090: 24,576 vs 24,124 MiB). A what-if
NVIDIA card is planned with its nominal memory less NVIDIA_RESERVE (an estimate), except where our
own measurement gives the figure (H100 SXM). A display attached to the card takes more: a what-if
assumes a card that runs nothing else. Apple's GPU may use the recommended working set of the
unified memory (`apple_working_set`).

Names match case- and spacing-tolerantly, with or without the vendor's words ("NVIDIA GeForce RTX
4090", "rtx4090", "4090"); a card sold with several memory sizes is named with its size ("RTX 4060
Ti 16GB"), its bare name being the first size listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.hardware import Device, GiB, MiB

GB_S = 1e9  # vendors quote bandwidth in decimal gigabytes per second
NVIDIA_RESERVE = 512 * MiB  # NVML total - CUDA total, measured 452-640 MiB on public cards (an estimate)


@dataclass(frozen=True)
class Card:
    name: str
    backend: str  # cuda, rocm, metal
    memory: int  # bytes: the card's memory, or an Apple chip's unified memory
    sm_count: int | None  # SMs (NVIDIA), compute units (AMD), GPU cores (Apple)
    threads_per_sm: int | None
    compute_capability: str | None  # "8.9" (NVIDIA), "gfx1100" (AMD), None (Apple)
    bandwidth: float  # bytes/s
    aliases: tuple[str, ...] = ()
    visible: int | None = None  # the total CUDA reports, where measured

    @property
    def total(self) -> int:
        """The memory llama.cpp would see as the device's total."""
        if self.visible is not None:
            return self.visible
        if self.backend == "cuda":
            return self.memory - NVIDIA_RESERVE
        if self.backend == "metal":
            return apple_working_set(self.memory)
        return self.memory


def _nv(
    name: str, gib: float, sms: int, threads: int, cc: str, gbs: float, *aliases: str, visible: int | None = None
) -> Card:
    return Card(name, "cuda", int(gib * GiB), sms, threads, cc, gbs * GB_S, aliases, visible)


def _amd(name: str, gib: float, cus: int, gfx: str, gbs: float, *aliases: str) -> Card:
    # threads per CU are left out: the HIP context is an estimate that does not use them
    return Card(name, "rocm", int(gib * GiB), cus, None, gfx, gbs * GB_S, aliases)


def _apple(chip: str, cores: int, gbs: float, sizes: tuple[int, ...]) -> list[Card]:
    return [Card(f"{chip} {gib}GB", "metal", gib * GiB, cores, None, None, gbs * GB_S) for gib in sizes]


CARDS: tuple[Card, ...] = (
    # GeForce RTX 30 (Ampere, 8.6): nvidia.com/en-us/geforce/graphics-cards/30-series/ (each card's "specs"
    # tab: CUDA cores, memory, memory interface and speed), NVIDIA Ampere GA102 whitepaper
    _nv("RTX 3060", 12, 28, 1536, "8.6", 360),
    _nv("RTX 3060 Ti", 8, 38, 1536, "8.6", 448),
    _nv("RTX 3070", 8, 46, 1536, "8.6", 448),
    _nv("RTX 3070 Ti", 8, 48, 1536, "8.6", 608.3),
    _nv("RTX 3080", 10, 68, 1536, "8.6", 760.3, "rtx 3080 10gb"),
    _nv("RTX 3080 12GB", 12, 70, 1536, "8.6", 912),
    _nv("RTX 3080 Ti", 12, 80, 1536, "8.6", 912.4),
    _nv("RTX 3090", 24, 82, 1536, "8.6", 936.2),
    _nv("RTX 3090 Ti", 24, 84, 1536, "8.6", 1008),
    # GeForce RTX 40 (Ada Lovelace, 8.9): nvidia.com/en-us/geforce/graphics-cards/40-series/ (specs tabs),
    # NVIDIA Ada Lovelace architecture whitepaper
    _nv("RTX 4060", 8, 24, 1536, "8.9", 272),
    _nv("RTX 4060 Ti", 8, 34, 1536, "8.9", 288, "rtx 4060 ti 8gb"),
    _nv("RTX 4060 Ti 16GB", 16, 34, 1536, "8.9", 288),
    _nv("RTX 4070", 12, 46, 1536, "8.9", 504.2),
    _nv("RTX 4070 Super", 12, 56, 1536, "8.9", 504.2),
    _nv("RTX 4070 Ti", 12, 60, 1536, "8.9", 504.2),
    _nv("RTX 4070 Ti Super", 16, 66, 1536, "8.9", 672),
    _nv("RTX 4080", 16, 76, 1536, "8.9", 716.8),
    _nv("RTX 4080 Super", 16, 80, 1536, "8.9", 736.3),
    _nv("RTX 4090", 24, 128, 1536, "8.9", 1008),
    # GeForce RTX 50 (Blackwell, 12.0): nvidia.com/en-us/geforce/graphics-cards/50-series/ (specs tabs),
    # NVIDIA RTX Blackwell GPU architecture whitepaper
    _nv("RTX 5060", 8, 30, 1536, "12.0", 448),
    _nv("RTX 5060 Ti", 8, 36, 1536, "12.0", 448, "rtx 5060 ti 8gb"),
    _nv("RTX 5060 Ti 16GB", 16, 36, 1536, "12.0", 448),
    _nv("RTX 5070", 12, 48, 1536, "12.0", 672),
    _nv("RTX 5070 Ti", 16, 70, 1536, "12.0", 896),
    _nv("RTX 5080", 16, 84, 1536, "12.0", 960),
    _nv("RTX 5090", 32, 170, 1536, "12.0", 1792),
    # GeForce RTX 20 (Turing, 7.5) and GTX 10 (Pascal, 6.1): nvidia.com GeForce product pages
    # (specs), NVIDIA Turing and Pascal GP104/GP102 whitepapers
    _nv("RTX 2060", 6, 30, 1024, "7.5", 336),
    _nv("RTX 2070", 8, 36, 1024, "7.5", 448),
    _nv("RTX 2080", 8, 46, 1024, "7.5", 448),
    _nv("RTX 2080 Ti", 11, 68, 1024, "7.5", 616),
    _nv("GTX 1070", 8, 15, 2048, "6.1", 256),
    _nv("GTX 1080", 8, 20, 2048, "6.1", 320),
    _nv("GTX 1080 Ti", 11, 28, 2048, "6.1", 484),
    # workstation: nvidia.com/en-us/design-visualization/ (RTX A6000, RTX 6000 Ada, RTX PRO 6000
    # Blackwell datasheets)
    _nv("RTX A6000", 48, 84, 1536, "8.6", 768, "a6000"),
    _nv("RTX 6000 Ada", 48, 142, 1536, "8.9", 960, "rtx 6000 ada generation"),
    _nv("RTX PRO 6000 Blackwell", 96, 188, 1536, "12.0", 1792, "rtx pro 6000"),
    # data centre: nvidia.com/en-us/data-center/ datasheets (Tesla P100, V100, T4, A100, A10, L4, L40S,
    # H100, H200, DGX B200) and the Volta, Ampere GA100 and Hopper H100 whitepapers (SM counts)
    _nv("P100", 16, 56, 2048, "6.0", 732, "tesla p100", "p100 16gb"),
    _nv("V100", 16, 80, 2048, "7.0", 900, "tesla v100", "v100 16gb"),
    _nv("V100 32GB", 32, 80, 2048, "7.0", 900),
    _nv("T4", 16, 40, 1024, "7.5", 320, "tesla t4"),
    _nv("A100 40GB", 40, 108, 2048, "8.0", 1555),
    _nv("A100 80GB", 80, 108, 2048, "8.0", 2039, "a100", "a100 sxm"),
    _nv("A10", 24, 72, 1536, "8.6", 600),
    _nv("L4", 24, 58, 1536, "8.9", 300),
    _nv("L40S", 48, 142, 1536, "8.9", 864),
    # the H100 SXM's total is ours (bench/gpu, tests/data/cuda_h100.json.gz: 81,079 MiB free and total)
    _nv("H100 SXM", 80, 132, 2048, "9.0", 3350, "h100", "h100 80gb", "h100 80gb hbm3", visible=81079 * MiB),
    _nv("H100 PCIe", 80, 114, 2048, "9.0", 2000),
    _nv("H100 NVL", 94, 132, 2048, "9.0", 3900),
    _nv("H200", 141, 132, 2048, "9.0", 4800, "h200 sxm"),
    _nv("B200", 180, 148, 2048, "10.0", 8000),
    # AMD Radeon RX 7000 (RDNA3), RX 9000 (RDNA4), RX 6000 (RDNA2): amd.com/en/products/graphics/desktops/
    # radeon (specifications: compute units, memory, memory bandwidth); gfx targets from ROCm's
    # "GPU hardware specifications" table (rocm.docs.amd.com)
    _amd("RX 7900 XTX", 24, 96, "gfx1100", 960),
    _amd("RX 7900 XT", 20, 84, "gfx1100", 800),
    _amd("RX 7900 GRE", 16, 80, "gfx1100", 576),
    _amd("RX 7800 XT", 16, 60, "gfx1101", 624),
    _amd("RX 7700 XT", 12, 54, "gfx1101", 432),
    _amd("RX 7600", 8, 32, "gfx1102", 288),
    _amd("RX 7600 XT", 16, 32, "gfx1102", 288),
    _amd("RX 9070 XT", 16, 64, "gfx1201", 640),
    _amd("RX 9070", 16, 56, "gfx1201", 640),
    _amd("RX 9060 XT", 16, 32, "gfx1200", 320, "rx 9060 xt 16gb"),
    _amd("RX 6900 XT", 16, 80, "gfx1030", 512),
    _amd("RX 6800 XT", 16, 72, "gfx1030", 512),
    _amd("RX 6700 XT", 12, 40, "gfx1031", 384),
    # AMD Instinct: amd.com/en/products/accelerators/instinct (MI100, MI210, MI300X, MI325X datasheets)
    _amd("MI100", 32, 120, "gfx908", 1228.8),
    _amd("MI210", 64, 104, "gfx90a", 1638.4),
    _amd("MI300X", 192, 304, "gfx942", 5300),
    _amd("MI325X", 256, 304, "gfx942", 6000),
    # Apple silicon, by unified memory: apple.com tech specs of each Mac (support.apple.com/specs) and
    # the chips' press releases (GPU cores, memory bandwidth); the full-GPU variant of each chip
    *_apple("M1", 8, 68.25, (8, 16)),
    *_apple("M1 Pro", 16, 200, (16, 32)),
    *_apple("M1 Max", 32, 400, (32, 64)),
    *_apple("M1 Ultra", 64, 800, (64, 128)),
    *_apple("M2", 10, 100, (8, 16, 24)),
    *_apple("M2 Pro", 19, 200, (16, 32)),
    *_apple("M2 Max", 38, 400, (32, 64, 96)),
    *_apple("M2 Ultra", 76, 800, (64, 128, 192)),
    *_apple("M3", 10, 100, (8, 16, 24)),
    *_apple("M3 Pro", 18, 150, (18, 36)),
    *_apple("M3 Max", 30, 300, (36, 96)),  # the 30-core GPU: 300 GB/s
    *_apple("M3 Max", 40, 400, (48, 64, 128)),
    *_apple("M3 Ultra", 80, 819, (96, 256, 512)),
    *_apple("M4", 10, 120, (16, 24, 32)),
    *_apple("M4 Pro", 20, 273, (24, 48, 64)),
    *_apple("M4 Max", 32, 410, (36,)),  # the 32-core GPU: 410 GB/s
    *_apple("M4 Max", 40, 546, (48, 64, 128)),
)

_VENDOR_WORDS = ("nvidia", "geforce", "tesla", "quadro", "amd", "radeon", "instinct", "apple", "graphics")


def normalize(text: str) -> str:
    """A card name as compared: lower case, no vendor words, no spaces or punctuation."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "".join(w for w in words if w not in _VENDOR_WORDS)


def _short(key: str) -> str:
    """'rtx4090' -> '4090': the bare number, a common way to name a card."""
    return re.sub(r"^(rtx|gtx|rx)", "", key)


def _index() -> dict[str, Card]:
    keys: dict[str, Card] = {}
    shorts: dict[str, list[Card]] = {}
    for card in CARDS:
        for name in (card.name, *card.aliases):
            keys.setdefault(normalize(name), card)
        short = _short(normalize(card.name))
        if short != normalize(card.name):
            shorts.setdefault(short, []).append(card)
    for short, cards in shorts.items():
        if len(cards) == 1 and short not in keys:
            keys[short] = cards[0]
    return keys


_KEYS = _index()


class UnknownCard(ValueError):
    """A --gpu name not in the table; the message lists the nearest names."""


def near_matches(text: str, n: int = 5) -> list[str]:
    """The card names closest to `text` (for an error message)."""
    import difflib  # only for a name that did not match

    key = normalize(text)
    names = {normalize(c.name): c.name for c in CARDS}
    close = difflib.get_close_matches(key, list(names), n=n, cutoff=0.5)
    prefixed = [c.name for c in CARDS if key and normalize(c.name).startswith(key)]
    out = list(dict.fromkeys([*prefixed, *(names[k] for k in close)]))
    return out[:n]


def find_card(text: str) -> Card:
    """The card named `text`; UnknownCard (with the nearest names) when there is none, or when the name
    fits several sizes of one chip ("M2 Max": 32, 64 or 96 GB)."""
    key = normalize(text)
    card = _KEYS.get(key)
    if card is not None:
        return card
    near = near_matches(text)
    hint = f"; did you mean {', '.join(repr(n) for n in near)}?" if near else ""
    raise UnknownCard(
        f"unknown GPU {text!r}{hint} (vramchat --gpu list shows every card; --vram SIZE plans a bare size)"
    )


def identify(description: str) -> Card | None:
    """The card a driver's name describes ("NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"): the
    longest known name it starts with; None when nothing fits."""
    key = normalize(description)
    if not key:
        return None
    best: tuple[int, Card] | None = None
    for name, card in _KEYS.items():
        if key.startswith(name) and not name.isdigit() and (best is None or len(name) > best[0]):
            best = (len(name), card)
    return best[1] if best else None


def apple_working_set(ram: int) -> int:
    """macOS's recommended GPU working set (Metal's recommendedMaxWorkingSetSize) for a Mac with `ram`
    of unified memory: about 2/3 up to 32 GB, 3/4 from 36 to 96 GB, and 84% from 128 GB (107.52 GiB
    measured on 128 GB Macs under macOS 26; older releases gave 3/4 there). An estimate for a what-if:
    the real Mac's figure is read from Metal. `sudo sysctl iogpu.wired_limit_mb=N` raises it."""
    if ram <= 32 * GiB:
        return ram * 2 // 3
    if ram < 128 * GiB:
        return ram * 3 // 4
    return int(ram * 0.84)


def card_device(card: Card, index: int, name: str) -> Device:
    """A what-if device for `card`, named `name` (CUDA0, ROCm1, MTL0 ...), all of its memory free."""
    total = card.total
    return Device(
        name,
        "gpu",
        card.backend,
        total,
        total,
        unified=card.backend == "metal",
        description=f"what-if {card.name}",
        simulated=True,
        sm_count=card.sm_count,
        threads_per_sm=card.threads_per_sm,
        compute_capability=card.compute_capability,
        card=card.name,
        bandwidth=card.bandwidth,
        bandwidth_source="vendor spec sheet",
    )


def card_table() -> str:
    """Every card, one a line (`vramchat --gpu list`)."""
    lines = []
    for c in CARDS:
        kind = {"cuda": "SMs", "rocm": "CUs", "metal": "GPU cores"}[c.backend]
        arch = f", {'cc ' if c.backend == 'cuda' else ''}{c.compute_capability}" if c.compute_capability else ""
        mem = f"{c.memory / GiB:g} GiB" + (" unified" if c.backend == "metal" else "")
        lines.append(f"{c.name:<24} {c.backend:<6} {mem:>15}  {c.sm_count} {kind}{arch}, {c.bandwidth / GB_S:g} GB/s")
    return "\n".join(lines)

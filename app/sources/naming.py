"""What a GGUF file's name says: its quant, its shards, whether it is a projector."""

from __future__ import annotations

import posixpath
import re

from planner.units import SPLIT_NAME

# the quant tags llama.cpp's tools and the big uploaders put in file names, last one wins:
# Q4_K_M, Q8_0, IQ4_XS, IQ2_XXS, Q4_0_4_4, UD-Q4_K_XL, F16, BF16, F32, MXFP4, MXFP4_MOE, TQ1_0
_QUANT = re.compile(
    r"(?:^|[-_.])((?:UD-)?(?:I?Q\d(?:_[0-9]+)*(?:_K)?(?:_(?:XXS|XS|S|M|L|XL|NL))?|B?F(?:16|32)|MXFP4(?:_MOE)?|TQ\d_\d))"
    r"(?=$|[-_.])",
    re.IGNORECASE,
)


def base_name(path: str) -> str:
    return posixpath.basename(path)


def is_projector(path: str) -> bool:
    return "mmproj" in base_name(path).lower()


def is_gguf(path: str) -> bool:
    return path.lower().endswith(".gguf")


def model_stem(path: str) -> str:
    """The name without the folder, `.gguf` and a split suffix (-00001-of-00003)."""
    name = base_name(path)
    match = SPLIT_NAME.match(name)
    if match:
        return match["stem"]
    return name[:-5] if is_gguf(name) else name


def quant_of(path: str) -> str:
    """The quant tag in the file's name (upper case), or '' when it names none."""
    found = _QUANT.findall(model_stem(path)) or _QUANT.findall(base_name(posixpath.dirname(path)))
    return found[-1].upper() if found else ""


def split_of(path: str) -> tuple[str, int, int] | None:
    """(stem, index, count) of a shard of a split model (1-based index), or None."""
    match = SPLIT_NAME.match(base_name(path))
    if not match or int(match["count"]) < 2:
        return None
    return match["stem"], int(match["idx"]), int(match["count"])


def shard_names(path: str) -> list[str]:
    """Every shard's path (in the same folder) of the split model `path` belongs to, or [path]."""
    split = split_of(path)
    if split is None:
        return [path]
    stem, _, count = split
    folder = posixpath.dirname(path)
    return [posixpath.join(folder, f"{stem}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]

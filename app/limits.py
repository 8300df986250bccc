"""Limits a user can meet in more than one place (the settings file, the chat dialog, the engine)."""

DEFAULT_MAX_TOKENS = 512  # a reply's length unless the user sets another
MAX_TOKENS = 32768  # the longest reply the settings accept

# (lowest, highest) a sampling value may take, in the chat, on the command line and in a request;
# a value outside is refused with these words
RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "top_k": (0, 1000),
    "min_p": (0.0, 1.0),
    "repeat_penalty": (0.5, 2.0),
    "seed": (0, 2**32 - 1),
    "max_tokens": (1, MAX_TOKENS),
}
INTEGERS = {"top_k", "seed", "max_tokens"}


def checked(name: str, value: float | int) -> float | int:
    """`value` for the sampling setting `name`, as its kind (a whole number or not); ValueError when out of range."""
    low, high = RANGES[name]
    if not low <= value <= high:
        raise ValueError(f"{name.replace('_', ' ')} must be between {low:g} and {high:g}")
    return int(value) if name in INTEGERS else float(value)

"""vramchat: plan GPU and RAM use for GGUF models, then chat with them."""

import planner  # noqa: F401  (first: it keeps dataclasses' compiled methods between runs, planner/dataclass_code.py)

__version__ = "0.1.0"

"""GGUF memory planner: header -> model anatomy -> memory model -> fit plan.

Pure library: no Textual, no llama-cpp-python, no device probing.
"""

# the llama-cpp-python release whose vendored llama.cpp the rules are keyed to (pyproject pins the same)
LLAMA_CPP_VERSION = "0.3.36"
LLAMA_CPP_BUILD = f"llama-cpp-python {LLAMA_CPP_VERSION}"

# dataclasses' generated methods compiled once and kept beside the byte code (planner/dataclass_code.py); before
# any module defines a dataclass
from planner.dataclass_code import install as _install_dataclass_code  # noqa: E402

_install_dataclass_code()

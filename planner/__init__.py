"""GGUF memory planner: header -> model anatomy -> memory model -> fit plan.

Pure library: no Textual, no llama-cpp-python, no device probing.
"""

LLAMA_CPP_BUILD = "llama-cpp-python 0.3.36"

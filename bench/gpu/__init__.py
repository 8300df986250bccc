"""GPU truth: measurements of llama.cpp on a real CUDA build, made on a lent GPU machine.

`measure` runs there and writes one JSON file; `bench/accuracy.py` and the tests read that
file back on any machine, so the CUDA figures stay checked where no GPU is at hand.
"""

"""GPU truth: measurements of llama.cpp on a real CUDA build, made on a lent GPU machine.

bench/gpu/prepare.sh (here), then build.sh and measure.py (there); see prepare.sh for the commands.

`measure` runs there and writes one JSON file; `bench/accuracy.py` and the tests read that
file back on any machine, so the CUDA figures stay checked where no GPU is at hand.
"""

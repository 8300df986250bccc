"""GPU truth: measurements of llama.cpp on a real CUDA build, made on a lent GPU machine.

Here: `bash bench/gpu/prepare.sh` (what a call carries, in .gpu/). There, in one call carrying .gpu:
`LIMIT=550 bash bench/gpu/lent.sh` (build.sh builds llama-cpp-python for CUDA and llama-fit-params;
measure.py, with compare.py's speed and fit sections, writes one JSON file under $OUT). A follow-up
call on the still-warm machine skips the build (see lent.sh).

The records live in tests/data (cuda_h100.json.gz, cuda_h200.json.gz); bench/gpu/report.py and
report_h200.py render docs/accuracy.md's CUDA sections from them, and the tests read them back on
any machine, so the CUDA figures stay checked where no GPU is at hand.
"""

#!/bin/bash
# One short call on a lent machine for its CPU alone (no CUDA build: a CPU-only one, native, from the
# sdist in .gpu): bench/op_chain.py, then bench/speed_predict.py on the demo's header clone written with
# noise and the tiny zoo, its raw figures dumped for pricing again here (--dump). Carries .gpu (bench/gpu/prepare.sh):
#     LIMIT=270 bash bench/gpu/cpu_speed.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" .devbuild/cpu
left() { echo $(( ${LIMIT:-270} - ($(date +%s) - start) )); }
source bench/gpu/setup.sh deps || exit 1
lscpu | grep -E "Model name|^CPU\(s\)|Thread|L2|L3|NUMA node\(s\)" > "$OUT/cpu.txt"
[ -d .devbuild/src ] || { mkdir -p .devbuild/src && tar xzf .gpu/llama-src.tar.gz -C .devbuild/src; } || exit 1
export CMAKE_ARGS="-DLLAVA_BUILD=off" CMAKE_BUILD_PARALLEL_LEVEL=16
timeout "${BUILD_SECONDS:-150}" python3 -m pip wheel --no-deps --no-build-isolation --no-index -w .devbuild/cpu \
    -C build-dir="$PWD/.devbuild/cpu-cmake" .devbuild/src/llama_cpp_python-0.3.36 > "$OUT/build.log" 2>&1
echo "CPU build: rc=$? after $(( $(date +%s) - start )) s"
wheel=$(ls .devbuild/cpu/llama_cpp_python-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { tail -20 "$OUT/build.log"; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "$wheel" || exit 1
timeout 40 python3 bench/op_chain.py 2>&1 | tee "$OUT/op_chain.log"
python3 -m tests.support.header_clone write .gpu/demo-header.json.gz /tmp/demo-noise.gguf --noise
echo "speed_predict: $(left) s left"
timeout $(( $(left) - 3 )) python3 bench/speed_predict.py --demo /tmp/demo-noise.gguf --dump "$OUT/speed_dump.json" \
    --zoo "${ZOO:-llama-f16,llama-q8_0,llama-q4_k,qwen2-q4_0,qwen3-hd}" --wide none --runs 3 --zoo-runs 2 --probes 2 --tokens 32 \
    --demo-ctx 4096 --patience 0.5 --retries -1 2>&1 | tee "$OUT/speed_predict.log"
echo "done; $(left) s left"

#!/bin/bash
# One call on a lent GPU machine for speed (prepared here by bench/gpu/prepare.sh; the call carries .gpu):
#     LIMIT=570 bash bench/gpu/speed.sh
# 1. build llama-cpp-python for CUDA (build.sh, without llama-fit-params);
# 2. the plan's speed beside measured runs on the GPU: the demo's clone and the 8B shape at full, partial
#    and no offload (bench.gpu.measure --only machine,speed, GPU_SECONDS);
# 3. bench/speed_predict.py on the machine's CPU alone, the GPU hidden (CUDA_VISIBLE_DEVICES=""): the demo's
#    header clone written with noise (the model is too big to carry) and the tiny zoo, in what is left.
# Everything lands in $OUT: build.log, cuda_measurements.json, measure.log, speed_predict.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
left() { echo $(( ${LIMIT:-570} - ($(date +%s) - start) )); }
if [ -z "${SKIP_BUILD:-}" ]; then
    NO_FIT=1 BUILD_SECONDS=${BUILD_SECONDS:-380} bash bench/gpu/build.sh || { echo "build failed"; exit 1; }
fi
source bench/gpu/setup.sh || exit 1
echo "built; $(left) s left"
python3 -m bench.gpu.measure --out "$OUT" --budget "${GPU_SECONDS:-150}" --models gemma3-270m \
    --only machine,speed 2>&1 | tee "$OUT/measure.log"
python3 -m tests.support.header_clone write .gpu/demo-header.json.gz /tmp/demo-noise.gguf --noise
lscpu | grep -E "Model name|^CPU\(s\)|Thread|L2|L3" > "$OUT/cpu.txt"
echo "speed_predict: $(left) s left"
CUDA_VISIBLE_DEVICES="" timeout $(( $(left) - 5 )) python3 bench/speed_predict.py --demo /tmp/demo-noise.gguf \
    --zoo "${ZOO:-llama-f16,llama-q8_0,llama-q4_k,qwen2-q4_0,qwen3-hd}" --wide none --runs 3 --zoo-runs 2 \
    --probes 2 --tokens 32 --demo-ctx 4096 --patience 2 2>&1 | tee "$OUT/speed_predict.log"
echo "done; $(left) s left"

#!/bin/bash
# One call on a lent GPU machine: build llama-cpp-python for CUDA and llama-fit-params (build.sh),
# then measure in what is left of LIMIT seconds (bench.gpu.measure; everything lands in $OUT).
# Prepared here by bench/gpu/prepare.sh; the call carries .gpu:
#     LIMIT=560 bash bench/gpu/lent.sh
# A second call on the still-warm machine skips the build (its folder .devbuild stays there):
#     SKIP_BUILD=1 LIMIT=200 MODELS=skipped ONLY=buffers,dry_runs bash bench/gpu/lent.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ -z "${SKIP_BUILD:-}" ]; then
    BUILD_SECONDS=${BUILD_SECONDS:-400} bash bench/gpu/build.sh || { echo "build failed"; exit 1; }
fi
source bench/gpu/setup.sh || exit 1
left=$(( ${LIMIT:-560} - ($(date +%s) - start) ))
echo "measuring for $left s"
python3 -m bench.gpu.measure --out "$OUT" --budget "$left" --models "${MODELS:-new}" \
    --only "${ONLY:-machine,speed,nvml,fit,buffers}" 2>&1 | tee "$OUT/measure.log"

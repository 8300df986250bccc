#!/bin/bash
# Build llama-cpp-python 0.3.36 with CUDA on the GPU machine (sm_90), from the sdist carried in
# .gpu/llama-src.tar.gz. Resumable: CMake's build folder stays in .devbuild between calls on a
# warm machine. The wheel comes back under $OUT in 15 MiB parts (the tool's per-file limit).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" .devbuild
source bench/gpu/setup.sh deps || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv,noheader
nvcc --version | tail -2
if [ ! -d .devbuild/src ]; then
    mkdir -p .devbuild/src && tar xzf .gpu/llama-src.tar.gz -C .devbuild/src || exit 1
fi
export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAVA_BUILD=off -DGGML_RPC=on"
export CMAKE_BUILD_PARALLEL_LEVEL=16
start=$(date +%s)
timeout "${BUILD_SECONDS:-500}" python3 -m pip wheel --no-deps --no-build-isolation --no-index \
    -w .devbuild/wheel -C build-dir="$REPO/.devbuild/cmake" -v .devbuild/src/llama_cpp_python-0.3.36 \
    > "$OUT/build.log" 2>&1
rc=$?
echo "build: rc=$rc in $(( $(date +%s) - start )) s"
grep -E "error|Error" "$OUT/build.log" | grep -v -E "Werror|error\.h|errors\.|_error|error_" | head -20
tail -5 "$OUT/build.log"
wheel=$(ls .devbuild/wheel/llama_cpp_python-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || exit 1
ls -la "$wheel"
sha256sum "$wheel"
if [ -n "${WHEEL_BACK:-}" ]; then  # 268 MB for sm_90: more than a call brings back (64 MiB)
    basename "$wheel" > "$OUT/llama-wheel.name"
    split -b 15M -d "$wheel" "$OUT/llama-wheel.part-"
fi
# llama.cpp's own fit (tools/fit-params), from the same build folder: the wheel's build leaves tools out
# (NO_FIT=1: a call that does not compare fits spends its seconds measuring instead)
if [ -z "${NO_FIT:-}" ]; then
    t=$(date +%s)
    { cmake -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF .devbuild/cmake \
        && cmake --build .devbuild/cmake --target llama-fit-params -j 16; } > "$OUT/fit-build.log" 2>&1
    echo "llama-fit-params: rc=$? in $(( $(date +%s) - t )) s"
fi
source bench/gpu/setup.sh || exit 1
python3 -c "import llama_cpp; print('gpu offload:', llama_cpp.llama_supports_gpu_offload())"
python3 -m app --devices 2>&1 | tail -25

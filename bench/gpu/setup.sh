# Sourced on the GPU machine: the Python packages the image lacks (carried as wheels in .gpu/whl)
# and, unless called with "deps", the CUDA build of llama-cpp-python (built in .devbuild/wheel
# by build.sh on this machine, or carried back in .gpu/llama-wheel.part-*).
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || return 1
if [ "${1:-}" != deps ]; then
    wheel=$(ls .devbuild/wheel/llama_cpp_python-*.whl 2>/dev/null | head -1)
    if [ -z "$wheel" ] && ls .gpu/llama-wheel.part-* >/dev/null 2>&1; then
        mkdir -p .devbuild/wheel
        wheel=.devbuild/wheel/$(cat .gpu/llama-wheel.name)
        cat .gpu/llama-wheel.part-* > "$wheel"
    fi
    [ -n "$wheel" ] || { echo "no CUDA wheel of llama-cpp-python: run bench/gpu/build.sh first"; return 1; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheel" || return 1
fi

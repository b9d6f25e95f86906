# The CPU benchmarks' peers, fetched and built once under $peers (sourced by bench.sh and
# llama_bench.sh, which set peers and levels): the llama-cpp-python sdist (pinned) carries
# llama.cpp and its gguf-py; llama-bench is built from it for each instruction-set level
# ("native": GGML_NATIVE; "avx2": AVX2+FMA+F16C with AVX-512 off); a venv gets numpy and
# gguf-py to write the GGUF files. Building llama.cpp takes a while on 2 cores (ccache
# helps the second).
llama_version=0.3.36
src=$peers/llama_cpp_python-$llama_version/vendor/llama.cpp
mkdir -p "$peers"
if [ ! -d "$src" ]; then
    pip download --no-deps --no-binary :all: "llama-cpp-python==$llama_version" -d "$peers" >/dev/null
    tar -xzf "$peers/llama_cpp_python-$llama_version.tar.gz" -C "$peers"
fi
build_llama() { # name, cmake flags...
    local dir=$peers/llama-$1
    shift
    if [ ! -x "$dir/bin/llama-bench" ]; then
        cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF "$@" >"$dir.log" 2>&1
        cmake --build "$dir" -j2 --target llama-bench >>"$dir.log" 2>&1
    fi
}
for level in $levels; do
    case $level in
    native) build_llama native -DGGML_NATIVE=ON ;;
    avx2) build_llama avx2 -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
        -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF ;;
    *) echo "unknown level '$level' (native or avx2)" >&2; exit 1 ;;
    esac
done
if [ ! -x "$peers/venv/bin/python" ]; then
    python3 -m venv "$peers/venv"
    "$peers/venv/bin/pip" install -q numpy "$src/gguf-py"
fi

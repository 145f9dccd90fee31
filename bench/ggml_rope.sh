#!/bin/sh
# fastpe's C RoPE against ggml's CPU RoPE (llama.cpp's kernel), side by side in one process:
#
#     sh bench/ggml_rope.sh GGML_SOURCE_DIR [BUILD_DIR]
#
# GGML_SOURCE_DIR is a checkout of https://github.com/ggml-org/ggml (not shipped here).
# Builds ggml's CPU backend with llama.cpp's defaults (native, OpenMP, static), libfastpe
# from this tree (its own Release build), then bench/ggml_rope.c, and runs it: q of 4096
# positions x 32 heads x 128 float32 in both modes on 1-16 threads, a decoding step, a
# memcpy of q, and the two outputs against a float64 rotation.
set -eu
GGML=${1:?usage: sh bench/ggml_rope.sh GGML_SOURCE_DIR [BUILD_DIR]}
B=${2:-build-ggml-bench}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
J=$(nproc 2>/dev/null || echo 2)
cmake -S "$GGML" -B "$B/ggml" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=ON \
    -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF > /dev/null
cmake --build "$B/ggml" -j"$J" > /dev/null
cmake -S "$ROOT" -B "$B/fastpe" -DCMAKE_BUILD_TYPE=Release -DFASTPE_BUILD_TESTS=OFF > /dev/null
cmake --build "$B/fastpe" -j"$J" > /dev/null
lib() { find "$B/$1" -name "$2" | head -n 1; }
cc -O2 -std=c11 -I"$GGML/include" -I"$ROOT/lib/include" "$ROOT/bench/ggml_rope.c" \
    -o "$B/ggml_rope" "$(lib ggml libggml.a)" "$(lib ggml libggml-cpu.a)" \
    "$(lib ggml libggml-base.a)" "$(lib fastpe libfastpe.a)" -lstdc++ -fopenmp -lpthread -lm
"$B/ggml_rope"

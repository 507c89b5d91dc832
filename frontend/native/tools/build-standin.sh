#!/usr/bin/env bash
# Builds the stand-in libcuda.so.1 (standin.c; tools/README.md), the baseline of
# `bench startup --stand-in`:   build-standin.sh OUT_DIR
# Needs gcc only (no CUDA toolkit, no JDK).
set -euo pipefail
if [[ $# -ne 1 ]]; then
    echo "usage: build-standin.sh OUT_DIR" >&2
    exit 2
fi
out=$1
here=$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")
if ! command -v gcc >/dev/null 2>&1; then
    echo "build-standin.sh: gcc is needed (apt-get install gcc)" >&2
    exit 1
fi
mkdir -p "$out"
gcc -std=c11 -O2 -Wall -Wextra -Werror -Wno-unused-parameter -fPIC -shared -fvisibility=hidden \
    -Wl,-soname,libcuda.so.1 -Wl,--no-undefined \
    "$here/standin.c" -o "$out/libcuda.so.1.tmp" -ldl
mv -f "$out/libcuda.so.1.tmp" "$out/libcuda.so.1"
ln -sfn libcuda.so.1 "$out/libcuda.so"

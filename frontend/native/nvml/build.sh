#!/usr/bin/env bash
# Builds GPUsockets' libnvidia-ml.so.1 (NVML for guests without a GPU; see nvml.c) next to our
# libcuda.so.1, which it loads from its own directory. Run by the frontend module's Maven build:
#   build.sh OUT_DIR
# Needs gcc only: no CUDA toolkit, no driver headers (nvml_abi.h declares the ABI).
set -euo pipefail
out=$1
here=$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")
if ! command -v gcc >/dev/null 2>&1; then
    echo "frontend/native/nvml/build.sh: gcc is needed to build libnvidia-ml.so.1 (apt-get install gcc)" >&2
    exit 1
fi
mkdir -p "$out"
gcc -std=c11 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter -fPIC -shared -fvisibility=hidden \
    -I"$here" -Wl,-soname,libnvidia-ml.so.1 -Wl,--no-undefined \
    "$here/nvml.c" -o "$out/libnvidia-ml.so.1.tmp" -ldl -lpthread
mv -f "$out/libnvidia-ml.so.1.tmp" "$out/libnvidia-ml.so.1"
ln -sfn libnvidia-ml.so.1 "$out/libnvidia-ml.so"

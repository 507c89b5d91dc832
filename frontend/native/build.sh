#!/usr/bin/env bash
# Builds the frontend's libcuda.so.1 (run by the frontend module's Maven build):
#   build.sh OUT_DIR GENERATED_DIR JAVA_HOME
# Needs gcc and the JDK's jni.h; no CUDA toolkit.
set -euo pipefail
out=$1 generated=$2 java_home=$3
here=$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")
if ! command -v gcc >/dev/null 2>&1; then
    echo "frontend/native/build.sh: gcc is needed to build libcuda.so.1 (apt-get install gcc)" >&2
    exit 1
fi
mkdir -p "$out"
gcc -std=c11 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -fPIC -shared -fvisibility=hidden \
    -I"$here/src" -I"$java_home/include" -I"$java_home/include/linux" \
    -Wl,-soname,libcuda.so.1 -Wl,--no-undefined \
    "$here"/src/*.c "$generated/gpusockets_exports.c" \
    -o "$out/libcuda.so.1.tmp" -ldl -lpthread
mv -f "$out/libcuda.so.1.tmp" "$out/libcuda.so.1"
ln -sfn libcuda.so.1 "$out/libcuda.so"

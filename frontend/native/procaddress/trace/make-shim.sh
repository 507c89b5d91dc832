#!/usr/bin/env bash
# Builds the tracing shim (shim-head.c) against the real libcuda.so.1 on a GPU machine:
#   make-shim.sh REAL_LIBCUDA OUTDIR   ->  OUTDIR/libcuda.so.1
set -euo pipefail
real=${1:-/usr/local/nvidia/lib64/libcuda.so.1}
out=${2:-shim}
here=$(dirname -- "$(readlink -f -- "$0")")
mkdir -p "$out"
c=$out/shim.c
cat "$here/shim-head.c" > "$c"
syms=$(nm -D --defined-only "$real" | awk '$2 ~ /^[TtWi]$/ {print $3}' | sed 's/@.*//' | sort -u |
    grep -vx -e cuGetProcAddress -e cuGetProcAddress_v2 -e cuGetExportTable -e _init -e _fini)
for s in $syms; do
    echo "static void *real_$s __attribute__((used)); __attribute__((naked)) void $s(void) { __asm__ volatile(\"jmp *real_$s(%rip)\"); }" >> "$c"
done
{
    echo "__attribute__((constructor)) static void shim_init(void) {"
    echo "    const char *path = getenv(\"GPUSOCKETS_REAL_LIBCUDA\");"
    echo "    real = dlopen(path ? path : \"$real\", RTLD_NOW | RTLD_LOCAL);"
    printf '%s\n' "    if (!real) { fprintf(stderr, \"shim: %s\\n\", dlerror()); abort(); }"
    echo "    const char *lp = getenv(\"GPUSOCKETS_SHIM_LOG\");"
    echo "    shim_log = fopen(lp ? lp : \"/tmp/cuda-shim.log\", \"a\");"
    echo "    if (!shim_log) shim_log = stderr;"
    for s in $syms; do echo "    real_$s = dlsym(real, \"$s\");"; done
    echo "}"
} >> "$c"
gcc -O1 -shared -fPIC -o "$out/libcuda.so.1" "$c" -ldl -lpthread -Wl,-soname,libcuda.so.1
ln -sf libcuda.so.1 "$out/libcuda.so"
echo "make-shim: $out/libcuda.so.1 forwards $(echo "$syms" | wc -l) symbols"

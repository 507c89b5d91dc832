#!/usr/bin/env bash
# On a GPU machine: what cudart (static and shared) and PyTorch ask libcuda.so.1 for, through the
# tracing shim, and their native start-up and run times. Writes into OUTDIR (default trace-out).
set -uo pipefail
here=$(dirname -- "$(readlink -f -- "$0")")
out=${1:-trace-out}
mkdir -p "$out"
real=${REAL_LIBCUDA:-/usr/local/nvidia/lib64/libcuda.so.1}
shim=$(mktemp -d)
"$here/make-shim.sh" "$real" "$shim" > "$out/make-shim.txt" 2>&1 || { cat "$out/make-shim.txt"; exit 1; }
nvcc -O2 -arch=sm_90 "$here/rt_start.cu" -o "$shim/rt_static" > "$out/nvcc.txt" 2>&1
nvcc -O2 -arch=sm_90 -cudart shared "$here/rt_start.cu" -o "$shim/rt_shared" >> "$out/nvcc.txt" 2>&1
{
    for _ in 1 2 3; do
        echo "static: $("$shim/rt_static")"
        echo "shared: $("$shim/rt_shared")"
    done
} > "$out/cudart-start-native.txt" 2>&1
GPUSOCKETS_SHIM_LOG=$out/shim-cudart-static.log LD_LIBRARY_PATH=$shim:${LD_LIBRARY_PATH:-} "$shim/rt_static" > "$out/cudart-static-shim.txt" 2>&1
GPUSOCKETS_SHIM_LOG=$out/shim-cudart-shared.log LD_LIBRARY_PATH=$shim:${LD_LIBRARY_PATH:-} "$shim/rt_shared" > "$out/cudart-shared-shim.txt" 2>&1
{
    echo "native:"; python3 "$here/torch_work.py" 2>&1 | tail -5
    echo "native again:"; python3 "$here/torch_work.py" 2>&1 | tail -5
    echo "through the shim:"
    GPUSOCKETS_SHIM_LOG=$out/shim-torch.log LD_LIBRARY_PATH=$shim:${LD_LIBRARY_PATH:-} python3 "$here/torch_work.py" 2>&1 | tail -5
} > "$out/torch.txt"
wc -l "$out"/*.log
cat "$out/cudart-start-native.txt" "$out/torch.txt"

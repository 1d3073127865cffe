#!/usr/bin/env bash
# Runs the CUDA tests and `cuda_waves --bench` on the GPU machine. Made self-contained by
# bundle.sh (beside it), which copies into one folder, built on the development machine:
#   cuda_waves     target/release/examples/cuda_waves (--features cuda)
#   cuda-tests     the tests/cuda.rs binary (cargo test --release --features cuda --no-run)
#   kernels.cubin  the kernels, used only if nvcc fails here
#   src/           kernels.cu, variants.cuh, memory.cuh and include/ (hostcall.h, hostcall_cuda.cuh, hostcall_cuda_rpc.cuh), compiled here
# and this script. Run it as `bash FOLDER/run-on-device.sh`. Logs go to $OUT (default
# /tmp/hostcall-cuda). cuda_waves gets WAVES_ARGS (default `--bench`: GPU 0's benchmark) then
# BENCH_ARGS; on a machine with several GPUs, `WAVES_ARGS="--scaling"` measures one GPU against
# all of them (every visible GPU is served, and checked, either way). SKIP_TESTS=1 skips tests/cuda.rs.
set -uo pipefail
OUT=${OUT:-/tmp/hostcall-cuda}
CARRY=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
{
    echo "== machine"
    uname -m
    ldd --version | head -1
    nproc
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,pcie.link.gen.current,pcie.link.width.current --format=csv
    nvidia-smi topo -m 2>/dev/null || true
    lscpu 2>/dev/null | grep -E '^(Model name|Socket|Core|Thread|NUMA node)' || true
    echo "cpu0 siblings: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)"
    echo "== kernels"
    NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    "$NVCC" --version | tail -2
    MODULE=$CARRY/kernels.cubin
    if "$NVCC" -arch=sm_90 -cubin -Xptxas -v -I "$CARRY/src/include" -o "$OUT/kernels.cubin" \
        "$CARRY/src/kernels.cu" >"$OUT/nvcc.log" 2>&1; then
        MODULE=$OUT/kernels.cubin
        echo "kernels.cubin built here"
    else
        tail -20 "$OUT/nvcc.log"
        echo "nvcc failed here: using the carried kernels.cubin"
    fi
    if [ -z "${SKIP_TESTS:-}" ]; then
        echo "== tests/cuda.rs"
        HOSTCALL_CUDA_MODULE=$MODULE timeout 300 "$CARRY/cuda-tests" --include-ignored --test-threads=1
    fi
    echo "== cuda_waves ${WAVES_ARGS---bench} ${BENCH_ARGS:-}"
    # shellcheck disable=SC2086
    timeout 400 "$CARRY/cuda_waves" --module "$MODULE" ${WAVES_ARGS---bench} ${BENCH_ARGS:-}
    echo "cuda_waves exit=$?"
} 2>&1 | tee "$OUT/run.log"

#!/usr/bin/env bash
# Builds what the GPU machine needs into one folder (default .device-carry/cuda), from the
# repository root: the host program and the CUDA test binary (Rust, built here: the GPU machine
# has no Rust), the kernels' source (kernels.cu, variants.cuh, memory.cuh) and headers (compiled there with nvcc), a cubin built here
# when nvcc is on the PATH (a fallback), and run-on-device.sh. Then, with the device tool:
#   run: bash .device-carry/cuda/run-on-device.sh   carry: [".device-carry/cuda"]
set -euo pipefail
DEST=${1:-.device-carry/cuda}
mkdir -p "$DEST/src/include"
cargo build --release -p hostcall --features cuda --example cuda_waves
TEST=$(cargo test --release -p hostcall --features cuda --test cuda --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
cp target/release/examples/cuda_waves "$DEST/cuda_waves"
cp "$TEST" "$DEST/cuda-tests"
cp std-adapter/examples/cuda/kernels.cu std-adapter/examples/cuda/variants.cuh std-adapter/examples/cuda/memory.cuh "$DEST/src/"
cp include/hostcall.h include/hostcall_cuda.cuh include/hostcall_cuda_rpc.cuh "$DEST/src/include/"
cp std-adapter/examples/cuda/run-on-device.sh "$DEST/run-on-device.sh"
if command -v nvcc >/dev/null; then
    nvcc -arch=sm_90 -cubin -I include -o "$DEST/kernels.cubin" std-adapter/examples/cuda/kernels.cu
fi
ls -la "$DEST"

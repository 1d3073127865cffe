#!/usr/bin/env bash
# Side-by-side H200 throughput of several builds of cuda_waves. Bundle one build with bundle.sh
# (its kernels' source is used for all), put each other build's stripped cuda_waves in a folder of
# its own beside it (FOLDER/NAME/cuda_waves), copy this script into FOLDER, carry FOLDER and run:
#   bash FOLDER/ab-on-device.sh ROUNDS NAME...   (the bundle's folder is one of the NAMEs)
# The kernels are compiled once; each round runs every build in turn with
# `--bench $ARGS` (default: line and phase, 1 and 8 listener threads, 1,056 warps, 5 runs a
# cell) and keeps the throughput tables of the default, keep-packet and keep-port variants in
# $OUT/h200-ab.log (default /tmp).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=$1
shift
BUNDLE=${BUNDLE:-cuda}
MODULE=$(mktemp --suffix=.cubin)
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$NVCC" -arch=sm_90 -cubin -I "$HERE/$BUNDLE/src/include" -o "$MODULE" "$HERE/$BUNDLE/src/kernels.cu" || exit 1
for round in $(seq 1 "$ROUNDS"); do
    for build in "$@"; do
        echo "== round $round: $build"
        # shellcheck disable=SC2086 # ARGS is a list of words
        timeout 200 "$HERE/$build/cuda_waves" --module "$MODULE" --bench \
            ${ARGS:---protocol line,phase --threads 1,8 --warps 1056 --repeat 5} 2>&1 |
            grep -E -A2 "table \(M warp-calls/s, protocol=(line|phase|rpc) variant=(default|keep-packet|keep-port)," |
            grep -vE '^--|warps +1 thr'
        echo "exit=${PIPESTATUS[0]}"
    done
done >"${OUT:-/tmp}/h200-ab.log" 2>&1

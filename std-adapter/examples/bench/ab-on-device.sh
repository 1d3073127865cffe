#!/usr/bin/env bash
# Side-by-side timing of several builds of the bench on the device machine's CPU. Build each
# commit here (`cargo build --release -p hostcall --example bench`), copy each
# target/release/examples/bench into one folder under a name of its own (bench-COMMIT), copy this
# script beside them, carry the folder and run it there:
#   bash FOLDER/ab-on-device.sh RUNS bench-A bench-B ...
# Each run runs every build in turn (`--rounds $ROUNDS --only $ONLY`, defaults 9 and _1l), so the
# builds alternate; everything goes to $OUT/ab.log (default /tmp).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RUNS=$1
shift
ROUNDS=${ROUNDS:-9}
ONLY=${ONLY:-_1l}
LOG=${OUT:-/tmp}/ab.log
{
    lscpu | grep -E '^(Model name|Socket|Core|Thread)'
    nproc
    for run in $(seq 1 "$RUNS"); do
        for build in "$@"; do
            echo "== run $run: $build --rounds $ROUNDS --only $ONLY"
            timeout 250 "$HERE/$build" --rounds "$ROUNDS" --only "$ONLY"
            echo "exit=$?"
        done
    done
} 2>&1 | tee -a "$LOG"

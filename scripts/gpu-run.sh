#!/usr/bin/env bash
# Runs the CUDA checks on the GPU machine from .gpu/bundle.tar.xz (made by
# scripts/gpu-bundle.sh): the binding's and the driver's test binaries, then
# the tool's machine listing, vector-scal, Cholesky on the GPU and with CPUs
# (dmda), and the bandwidth bench; then, since the GPU machine has 16 cores,
# the workers scaling study (scripts/scaling.sh). Logs go to $OUT (or
# /tmp/gpu-out). ONLY=scaling runs the study alone, for a device call of
# its own: the tests may take most of one call's 10 minutes.
# Extra arguments are passed to both test binaries (-test.run=..., say).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
w=$(mktemp -d)
tar -C "$w" -xJf .gpu/bundle.tar.xz
for d in "$w"/debs/*.deb; do dpkg -x "$d" "$w/root"; done
export LD_LIBRARY_PATH="$w/root/usr/lib/x86_64-linux-gnu:$w/root/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STARPU_TEST_DRIVER_CUDA="$w/bin/plugins/driver-cuda" STARPU_PLUGIN_DIR="$w/bin/plugins"
[[ -d /usr/local/cuda/include ]] && export STARPU_CUDA_INCLUDE=/usr/local/cuda/include
if [[ ${ONLY:-} == scaling ]]; then
  BIN="$w/bin/starpu" PLUGINS="$w/bin/plugins" bash scripts/scaling.sh 2>&1 | tee "$out/scaling.log" | tail -n 55
  exit "${PIPESTATUS[0]}"
fi
{
  nvidia-smi -L
  (cd "$w" && ./cu.test -test.v -test.timeout 8m "$@") 2>&1 | tail -n 400
} >"$out/cu.log" 2>&1
(cd "$w" && ./cudadriver.test -test.v -test.timeout 8m "$@") >"$out/cudadriver.log" 2>&1
s="$w/bin/starpu"
{
  "$s" machine
  "$s" run vector-scal
  STARPU_NCPU=0 "$s" run cholesky --precision single --size 8192 --nblocks 8
  "$s" run cholesky --sched dmda --precision single --size 8192 --nblocks 16
  "$s" bench bandwidth
} >"$out/workloads.log" 2>&1
BIN="$s" PLUGINS="$w/bin/plugins" bash scripts/scaling.sh >"$out/scaling.log" 2>&1
grep -hE '^(--- FAIL|FAIL|ok|PASS)' "$out"/cu.log "$out"/cudadriver.log | tail -n 40
tail -n 30 "$out/workloads.log"
tail -n 55 "$out/scaling.log"

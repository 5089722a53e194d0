#!/usr/bin/env bash
# Resilience figure: runs Cholesky 4096/32 with --retryable and sends a
# signal (KILL or STOP) to the CPU driver plugin DELAY seconds after it
# starts; prints the run's closing line. With STOP, set STARPU_PLUGIN_TIMEOUT
# (say 1s) so that the stopped plugin is noticed soon.
#   scripts/kill-cholesky.sh 0.4 KILL [more run flags]
set -uo pipefail
cd "$(dirname "$0")/.."
delay=${1:-0.4} sig=${2:-KILL}
shift 2 || true
bin/starpu run cholesky --size 4096 --nblocks 32 --retryable "$@" >/tmp/kill-cholesky.out 2>/tmp/kill-cholesky.err &
pid=$!
for _ in $(seq 500); do
  drv=$(pgrep -P "$pid" -f driver-cpu | head -1)
  [[ -n "$drv" ]] && break
  sleep 0.01
done
sleep "$delay"
[[ -n "${drv:-}" ]] && kill -"$sig" "$drv" && echo "sent SIG$sig to driver-cpu (pid $drv)"
wait "$pid"; echo "exit $?"
tail -1 /tmp/kill-cholesky.out

#!/usr/bin/env bash
# How the runtime's cost grows with its workers: `bench overhead` with empty
# tasks on 1, 2, 4, 8 and 16 CPU workers (those the machine has cores for),
# under each policy, and the engine's CPU time per task beside the time per
# task. The engine is one goroutine on one thread: where its busy share
# nears 100%, it is what bounds the task rate.
#
# Workloads (TASKS tasks, the median of ROUNDS rounds in one runtime):
#   independent     independent tasks from one submitting goroutine
#   independent/S   the same from S goroutines at once (SUBMITTERS, 4): one
#                   submitter saturates before the engine does
#   chain           a chain through one RW buffer (one dependency hop a task)
#   tags            a chain by tags
#   chains/W        W chains of one RW buffer side by side, one submitter
#                   each: as much parallel work as workers
#
# Only driver-cpu and the policies are loaded (copied to a directory of
# their own), so that RAM is the only memory node on a machine with a GPU
# too: the CPU hot path is what this measures.
#
# Usage: scripts/scaling.sh            (BIN, WORKERS, SCHEDS, TASKS, ROUNDS,
#                                       SUBMITTERS override the defaults)
# Prints one line per workload, policy and worker count, then a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-bin/starpu}
scheds=${SCHEDS:-ws dmda}
tasks=${TASKS:-100000}
rounds=${ROUNDS:-3}
subs=${SUBMITTERS:-4}
cores=$(nproc)
workers=()
for w in ${WORKERS:-1 2 4 8 16}; do
  if ((w <= cores)); then
    workers+=("$w")
  else
    echo "scaling: $w workers left out: this machine has $cores cores" >&2
  fi
done
plugins=$(mktemp -d)
trap 'rm -rf "$plugins"' EXIT
src=${PLUGINS:-$(dirname "$bin")/plugins}
for p in driver-cpu $(printf 'sched-%s ' $scheds); do
  cp "$src/$p" "$plugins/$p"
done
chmod go-w "$plugins" "$plugins"/*
export OPENBLAS_NUM_THREADS=1
kvget() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
rows=()
for sched in $scheds; do
  for w in "${workers[@]}"; do
    for wl in independent "independent/$subs" chain tags "chains/$w"; do
      case $wl in
      independent) args=(--independent) ;;
      independent/*) args=(--independent --submitters "$subs") ;;
      chain) args=(--buffers 1) ;;
      tags) args=() ;;
      chains/*) args=(--buffers 1 --submitters "$w") ;;
      esac
      line=$("$bin" bench overhead --plugin-dir "$plugins" --sched "$sched" --ncpu "$w" \
        --tasks "$tasks" --rounds "$rounds" "${args[@]}" | tail -1)
      per=$(kvget per_task_us <<<"$line") eng=$(kvget engine_cpu_us <<<"$line")
      sub=$(kvget submit_us <<<"$line") ran=$(kvget executed <<<"$line")
      if [[ $ran != $((tasks * rounds)) ]]; then
        echo "scaling: $wl, $sched, $w workers: $ran tasks ran of $((tasks * rounds))" >&2
        exit 1
      fi
      row=$(awk -v wl="$wl" -v s="$sched" -v w="$w" -v p="$per" -v su="$sub" -v e="$eng" 'BEGIN {
        printf "%-15s %-5s %3d %8.2f %8.2f %8.2f %6.0f%% %10.0f", wl, s, w, p, su, e, 100 * e / p, 1e6 / p }')
      echo "$row"
      rows+=("$row")
    done
  done
done
echo
printf '%-15s %-5s %3s %8s %8s %8s %7s %10s\n' workload sched W "us/task" submit engine busy "tasks/s"
printf '%s\n' "${rows[@]}" | sort -s -k1,1 -k2,2
echo "scaling: $(nproc) cores, $tasks tasks, median of $rounds rounds; us per task: from the first submit to the end of wait-for-all, submitting, and the engine's CPU time"

#!/usr/bin/env bash
# Runs our distributed Cholesky (starpu run cholesky --mpi) and StarPU-MPI
# 1.3's (Debian's starpu-examples: mpi/mpi_cholesky) side by side under
# mpirun, one CPU worker per rank, the same size and tile count and
# scheduling policy, in alternated rounds (each round runs ours, then
# StarPU's twice), and prints the median GFlop/s of each and the ratio
# ours/StarPU (higher is better for us). Both time the factorisation
# alike: from a barrier after registration to every rank done; both deal
# the tiles 2D block-cyclic over the same grid of ranks.
#
# StarPU runs twice a round because of binding. Our ranks float (mpirun
# --bind-to none, Go threads unbound). StarPU, by default, binds each
# rank's CPU worker to core 0 and its MPI thread to core 1 (every rank to
# the same cores); unbound (STARPU_WORKERS_NOBIND, STARPU_MPI_NOBIND) its
# spinning threads fight for the cores instead. Which is better depends on
# the load, so both are measured and the ratio is taken against the
# better median.
#
# Usage: scripts/bench-mpi-vs-starpu.sh [ROUNDS] [SIZE/NBLOCKS ...]
#   ROUNDS   rounds per configuration (default 5)
#   SIZE/NB  matrix order and tiles per dimension (default 4096/16 2048/8)
# Environment: NPS (rank counts, default "2 4"), STARPU_SCHED (default
# lws, which both have), STARPU_MPI_CHOLESKY (StarPU's binary).
# More ranks than cores oversubscribe the machine: say so with the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shift || true
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(4096/16 2048/8)
nps=${NPS:-"2 4"}
theirs_bin=${STARPU_MPI_CHOLESKY:-/usr/lib/x86_64-linux-gnu/starpu/mpi/mpi_cholesky}
ours_bin=bin/starpu
for b in "$ours_bin" "$theirs_bin"; do
  [ -x "$b" ] || { echo "bench-mpi-vs-starpu: $b not found (make build; apt-get install starpu-examples)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "bench-mpi-vs-starpu: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
export STARPU_NCPU=1 OPENBLAS_NUM_THREADS=1 STARPU_SILENT=1 STARPU_SCHED=${STARPU_SCHED:-lws}
mpi=(mpirun --oversubscribe --bind-to none --mca btl self,vader)
[ "$(id -u)" -ne 0 ] || mpi+=(--allow-run-as-root)

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), sched $STARPU_SCHED, 1 CPU worker per rank, $rounds rounds"
for cfg in "${configs[@]}"; do
  size=${cfg%/*} nb=${cfg#*/}
  for np in $nps; do
    ours=() bound=() unbound=()
    for ((r = 0; r < rounds; r++)); do
      out=$("${mpi[@]}" -np "$np" "$ours_bin" run cholesky --mpi --size "$size" --nblocks "$nb" 2>&1) || { echo "$out" >&2; exit 1; }
      line=$(grep '^starpu cholesky ' <<<"$out" | tail -1)
      grep -q ' verified=true' <<<"$line" || { echo "ours: not verified: $line" >&2; exit 1; }
      ours+=("$(sed -n 's/.* gflops=\([^ ]*\).*/\1/p' <<<"$line")")
      grid=$(sed -n 's/.* grid=\([^ ]*\).*/\1/p' <<<"$line")
      # StarPU with its own binding, then unbound.
      for nobind in 0 1; do
        out=$(env STARPU_WORKERS_NOBIND=$nobind STARPU_MPI_NOBIND=$nobind "${mpi[@]}" -np "$np" "$theirs_bin" -size "$size" -nblocks "$nb" 2>&1) || { echo "$out" >&2; exit 1; }
        g=$(sed -n 's/^Synthetic GFlops : *//p' <<<"$out" | tail -1)
        if [ $nobind = 0 ]; then bound+=("$g"); else unbound+=("$g"); fi
      done
    done
    mo=$(printf '%s\n' "${ours[@]}" | median)
    mb=$(printf '%s\n' "${bound[@]}" | median) mu=$(printf '%s\n' "${unbound[@]}" | median)
    best=$(awk -v a="$mb" -v b="$mu" 'BEGIN { print (a > b ? a : b) }')
    echo "cholesky $size/$nb, $np ranks (grid $grid): ours $mo GFlop/s [${ours[*]}]; starpu-mpi bound $mb [${bound[*]}], unbound $mu [${unbound[*]}]; ratio to the better $(ratio "$mo" "$best")"
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

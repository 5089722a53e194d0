#!/usr/bin/env bash
# Cholesky against StarPU 1.3 in alternated rounds: each round runs ours
# with ws and dmda and StarPU's cholesky_implicit with lws and dmda, one
# after the other, so that the machine's drift (other processes, the VM's
# neighbours) hits all four alike. On the 2-core development machine one
# configuration's runs spread over 20 to 40%, so a single pair of runs
# says little; the figure to quote is the median over the rounds of the
# round's ratio, ours' best of ws and dmda to StarPU's best of lws and
# dmda. The last line gives the medians (GFlop/s) and that ratio.
# Usage: scripts/cholesky-ab.sh [SIZE] [NBLOCKS] [ROUNDS]
# LAYOUT=contiguous runs ours with each tile allocated apart (StarPU's
# cholesky_tile_tag layout) instead of the partitioned matrix
# cholesky_implicit uses; BIN names another build of ours.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-4096} nb=${2:-16} rounds=${3:-5}
layout=${LAYOUT:-partition}
peer=../shared/peers/starpu-baseline.sh
bin=${BIN:-bin/starpu}
export STARPU_NCPU=2 OPENBLAS_NUM_THREADS=1
gflops() { sed -n 's/.* gflops=\([^ ]*\).*/\1/p' | tail -1; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
  ws=$($bin run cholesky --precision single --size "$size" --nblocks "$nb" --layout "$layout" --sched ws | gflops)
  dm=$($bin run cholesky --precision single --size "$size" --nblocks "$nb" --layout "$layout" --sched dmda | gflops)
  lws=$(bash "$peer" cholesky "$size" "$nb" lws | gflops)
  sdm=$(bash "$peer" cholesky "$size" "$nb" dmda | gflops)
  ratio=$(awk -v a="$(best "$ws" "$dm")" -v b="$(best "$lws" "$sdm")" 'BEGIN { printf "%.3f", a / b }')
  echo "round $r: ours ws $ws dmda $dm, starpu lws $lws dmda $sdm, best/best $ratio"
  echo "$ws" >>"$tmp/ws"
  echo "$dm" >>"$tmp/dm"
  echo "$lws" >>"$tmp/lws"
  echo "$sdm" >>"$tmp/sdm"
  echo "$ratio" >>"$tmp/ratio"
done
ours=$(best "$(median <"$tmp/ws")" "$(median <"$tmp/dm")")
theirs=$(best "$(median <"$tmp/lws")" "$(median <"$tmp/sdm")")
echo "cholesky-ab size=$size nblocks=$nb layout=$layout rounds=$rounds ours_ws=$(median <"$tmp/ws") ours_dmda=$(median <"$tmp/dm") starpu_lws=$(median <"$tmp/lws") starpu_dmda=$(median <"$tmp/sdm") ours_best=$ours starpu_best=$theirs ratio=$(median <"$tmp/ratio")"

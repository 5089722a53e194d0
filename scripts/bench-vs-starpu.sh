#!/usr/bin/env bash
# Runs our benchmarks and StarPU 1.3's side by side, in one go, 2 CPU
# workers, and prints each pair and the ratio ours/StarPU (lower is better
# for per-task times, higher for GFlop/s). Cholesky runs ROUNDS (default 3)
# alternated rounds of both sides' two policies (scripts/cholesky-ab.sh); the
# tile kernels are timed in the CPU driver against direct calls (bench
# kernels), and the host's CPU model is printed.
# Usage: scripts/bench-vs-starpu.sh [NTASKS] [CHOLESKY_SIZE] [NBLOCKS]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000} size=${2:-4096} nb=${3:-16}
peer=../shared/peers/starpu-baseline.sh
bin=bin/starpu
export STARPU_NCPU=2 OPENBLAS_NUM_THREADS=1
val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2" | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
for b in 0 1; do
  ours=$($bin bench overhead --tasks "$n" --buffers "$b" | tail -1)
  for s in lws dmda; do
    theirs=$(STARPU_SCHED=$s bash "$peer" overhead "$n" "$b")
    echo "chain buffers=$b: ours $(val per_task_us "$ours") us, starpu-$s $(val per_task_us "$theirs") us, ratio $(ratio "$(val per_task_us "$ours")" "$(val per_task_us "$theirs")")"
  done
done
ours=$($bin bench overhead --tasks "$n" --independent | tail -1)
theirs=$(STARPU_SCHED=lws bash "$peer" async "$n")
echo "independent: ours $(val per_task_us "$ours") us, starpu-lws $(val per_task_us "$theirs") us, ratio $(ratio "$(val per_task_us "$ours")" "$(val per_task_us "$theirs")")"
ab=$(bash scripts/cholesky-ab.sh "$size" "$nb" "${ROUNDS:-3}" | tail -1)
echo "cholesky $size/$nb, ${ROUNDS:-3} alternated rounds: ours $(val ours_best "$ab") GFlop/s (ws $(val ours_ws "$ab"), dmda $(val ours_dmda "$ab")), starpu $(val starpu_best "$ab") (lws $(val starpu_lws "$ab"), dmda $(val starpu_dmda "$ab")), median of the rounds' ratios $(val ratio "$ab")"
# What running inside the CPU driver costs each tile kernel: the kernels
# of one factorisation, one worker, against the same calls made directly.
k=$(STARPU_NCPU=1 $bin bench kernels --size "$size" --nblocks "$nb" | tail -1)
echo "kernels in the driver / direct, $size/$nb, 1 worker (ratio of means, of medians): potrf $(val potrf_f32_ratio "$k") $(val potrf_f32_p50_ratio "$k"), trsm $(val trsm_f32_ratio "$k") $(val trsm_f32_p50_ratio "$k"), syrk $(val syrk_f32_ratio "$k") $(val syrk_f32_p50_ratio "$k"), gemm $(val gemm_f32_ratio "$k") $(val gemm_f32_p50_ratio "$k")"
echo "host: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores${OPENBLAS_CORETYPE:+, OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE}"
ref=$($bin bench sgemm --size "$size" --threads 2 | tail -1)
echo "openblas sgemm $size, 2 threads: $(val gflops "$ref") GFlop/s; cholesky ours/sgemm $(ratio "$(val ours_best "$ab")" "$(val gflops "$ref")"), starpu/sgemm $(ratio "$(val starpu_best "$ab")" "$(val gflops "$ref")")"

#!/usr/bin/env bash
# Packs what the GPU machine needs to run the CUDA tests and workloads into
# .gpu/bundle.tar.xz: the GPU machine has CUDA but no Go, no registries and
# no OpenBLAS, and the device tool carries at most 64 MiB of ignored files.
#
#   bash scripts/gpu-bundle.sh          # here, once per change
#   device run, carry [".gpu"]:  bash scripts/gpu-run.sh
#
# The bundle holds the test binaries of the CUDA binding and driver
# (`go test -c`), the starpu tool with the plugins a GPU run uses (stripped),
# and the Debian packages of the shared libraries driver-cpu links, which
# gpu-run.sh unpacks beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu
ex=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$ex")"
grep -qx '/.gpu/' "$ex" 2>/dev/null || echo '/.gpu/' >>"$ex"
rm -rf "$out/stage"
mkdir -p "$out/stage/bin/plugins" "$out/stage/debs"
flags=(-trimpath -ldflags=-s\ -w)
go build "${flags[@]}" -o "$out/stage/bin/starpu" ./cmd/starpu
for p in driver-cpu driver-cuda sched-ws sched-dmda; do
  go build "${flags[@]}" -o "$out/stage/bin/plugins/$p" "./plugins/$p"
done
chmod go-w "$out/stage/bin/plugins" "$out/stage/bin/plugins"/*
go test -c "${flags[@]}" -o "$out/stage/cu.test" ./plugins/driver-cuda/cu
go test -c "${flags[@]}" -o "$out/stage/cudadriver.test" ./plugins/driver-cuda/cudadriver
# The libraries driver-cpu and the tool link, as packages: dpkg -x puts them
# under a prefix of our choosing on the GPU machine.
(cd "$out/stage/debs" && apt-get download -qq libopenblas0-pthread libopenblas0 liblapacke libblas3 liblapack3 libtmglib3 libgfortran5 libquadmath0 >/dev/null)
tar -C "$out/stage" -cJf "$out/bundle.tar.xz" .
rm -rf "$out/stage"
ls -la "$out/bundle.tar.xz"

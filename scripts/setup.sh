#!/usr/bin/env bash
# Installs what building and testing the runtime needs, when it is missing:
# OpenBLAS and LAPACKE for the CPU driver's kernels, the OpenCL ICD loader,
# headers and pocl (a CPU OpenCL device) for the OpenCL driver, Chromium for the
# dashboard's browser test (core/stats_dashboard_browser_test.go). With --peers it also
# installs StarPU 1.3 (Debian) for the side-by-side benchmarks.
set -euo pipefail
pkgs=(gcc libopenblas-dev liblapacke-dev ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo libopenmpi-dev openmpi-bin chromium)
if [[ "${1:-}" == "--peers" ]]; then
  pkgs+=(starpu-examples starpu-tools libstarpu-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "setup: Go is not installed (need Go >= 1.26 on PATH)" >&2; exit 1; }
go mod download

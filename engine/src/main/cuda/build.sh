#!/usr/bin/env bash
# Compiles Scorch's CUDA kernels into a fatbin the engine jar carries (sm_90 machine code for Hopper, plus
# compute_90 PTX that newer GPUs' drivers compile at load). Run by Maven (engine's generate-resources phase).
# Without nvcc the jar is built without kernels: the CPU engine is unaffected, and the CUDA backend reports
# at start that its kernels are missing.
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)/scorch_kernels.cu"
out_dir="$1"
out="$out_dir/scorch_kernels.fatbin"
# NVCC names the compiler; NVCC=none builds without kernels even where nvcc exists.
nvcc="${NVCC:-$(command -v nvcc || true)}"
if [[ -z "$nvcc" && -x /usr/local/cuda/bin/nvcc ]]; then nvcc=/usr/local/cuda/bin/nvcc; fi
if [[ -z "$nvcc" || "$nvcc" == none ]]; then
  echo "[scorch] nvcc not found: CUDA kernels NOT built (the jar's CUDA backend will be unavailable; the CPU engine is unaffected)"
  rm -f "$out"
  exit 0
fi
mkdir -p "$out_dir"
if [[ -f "$out" && "$out" -nt "$src" ]]; then
  echo "[scorch] CUDA kernels up to date: $out"
  exit 0
fi
"$nvcc" -O3 --fatbin -std=c++17 \
  -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 \
  -o "$out" "$src"
echo "[scorch] CUDA kernels built with $("$nvcc" --version | tail -1): $out"

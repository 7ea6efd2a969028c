#!/usr/bin/env bash
# cuda-build.sh compiles cuda/kernels/*.cu(h) into cuda/kernels/kernels.fatbin
# (SASS for sm_80, sm_86, sm_89, sm_90 plus compute_90 PTX for newer GPUs) and
# writes cuda/kernels/kernels.stamp: the sha256 of the sources, the nvcc
# version and the flags. Both files are committed; the Go package embeds the
# fatbin (//go:embed), so building weft needs no CUDA toolkit.
#
# Why a stamp and not "rebuild and compare bytes": nvcc output depends on the
# toolkit version and host compiler and is not promised to be byte-
# reproducible, so CI compares what we control (the sources and flags) and
# only checks that the kernels still compile. See scripts/cuda-check.sh and
# cuda/kernels/stamp_test.go.
#
# Usage: scripts/cuda-build.sh            (needs nvcc: scripts/cuda-install.sh)
#        scripts/cuda-build.sh --hash     (print the sources hash only)
set -euo pipefail
cd "$(dirname "$0")/../cuda/kernels"

NVCC_FLAGS="-fatbin -O3 -std=c++14 \
-gencode arch=compute_80,code=sm_80 \
-gencode arch=compute_86,code=sm_86 \
-gencode arch=compute_89,code=sm_89 \
-gencode arch=compute_90,code=[sm_90,compute_90]"
# normalise whitespace so the stamp holds one line
NVCC_FLAGS="$(echo $NVCC_FLAGS)"

# sources_hash: sha256 over "name\n" + content of every kernel source, in
# byte order of the names (stamp_test.go computes the same).
sources_hash() {
	local f
	for f in $(LC_ALL=C ls *.cu *.cuh | LC_ALL=C sort); do
		printf '%s\n' "$f"
		cat "$f"
	done | sha256sum | cut -d' ' -f1
}

if [ "${1:-}" = "--hash" ]; then
	sources_hash
	exit 0
fi

command -v nvcc >/dev/null || { echo "cuda-build: nvcc not found (run scripts/cuda-install.sh)" >&2; exit 1; }
out="${WEFT_FATBIN_OUT:-kernels.fatbin}"
# shellcheck disable=SC2086
nvcc $NVCC_FLAGS -o "$out" weft.cu
size=$(stat -c %s "$out")
if [ "$size" -gt $((10 * 1024 * 1024)) ]; then
	echo "cuda-build: $out is $size bytes, over the 10 MB limit" >&2
	exit 1
fi
if [ "$out" = kernels.fatbin ]; then
	{
		echo "sources $(sources_hash)"
		echo "nvcc $(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*')"
		echo "flags $NVCC_FLAGS"
	} > kernels.stamp
fi
echo "cuda-build: wrote $out ($size bytes)"

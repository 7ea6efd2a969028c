#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend's check on a GPU machine, in one command.
#
#   scripts/gpu-check.sh --prepare   # here (needs Go): build .gpu/gpucheck
#                                    # and copy the stories260K models to
#                                    # .gpu/models (.gpu/ is git-ignored)
#   scripts/gpu-check.sh             # on the GPU machine (no Go needed):
#                                    # runs .gpu/gpucheck, report in $OUT
#
# The GPU machine needs the NVIDIA driver (libcuda.so.1) and cuBLAS
# (libcublas.so.13/.12/.11, from a CUDA install or a pip wheel such as
# nvidia-cublas); the script looks for cuBLAS on the loader path and in
# Python's site-packages and passes its folder with -libdir. It stays under
# 10 minutes on an H200 (timeout 540 s); the report is $OUT/gpucheck.md and
# $OUT/gpucheck.json, the log $OUT/gpucheck.log.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if [ "${1:-}" = "--prepare" ]; then
	shared="${WEFT_SHARED:-$root/../shared}"
	mkdir -p .gpu/models
	CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" go build -trimpath -o .gpu/gpucheck ./cuda/cmd/gpucheck
	for m in stories260K stories260K-F16 stories260K-Q8_0 stories260K-Q4_0; do
		cp "$shared/models/$m.gguf" .gpu/models/
	done
	echo "gpu-check: prepared .gpu/ ($(du -sh .gpu | cut -f1)); carry .gpu to the GPU machine"
	exit 0
fi

OUT="${OUT:-$root/out}"
mkdir -p "$OUT"
[ -x .gpu/gpucheck ] || { echo "gpu-check: .gpu/gpucheck missing: run scripts/gpu-check.sh --prepare where Go is" >&2; exit 1; }

{ nvidia-smi || true; } > "$OUT/nvidia-smi.txt" 2>&1

libdir=""
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so\.1[123]'; then
	for d in $(python3 -c 'import site,sys; print(" ".join(site.getsitepackages()+[site.getusersitepackages()]))' 2>/dev/null) /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
		f=$(ls "$d"/nvidia/cublas/lib/libcublas.so.1[123] "$d"/nvidia/cu13/lib/libcublas.so.1[123] "$d"/libcublas.so.1[123] 2>/dev/null | head -n 1 || true)
		if [ -n "$f" ]; then
			libdir=$(dirname "$f")
			break
		fi
	done
fi
echo "gpu-check: cuBLAS dir: ${libdir:-loader path}"
if [ -n "$libdir" ]; then
	# cuBLAS needs cuBLASLt from the same folder.
	export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

set +e
timeout 540 .gpu/gpucheck -models .gpu/models -out "$OUT" ${libdir:+-libdir "$libdir"} "$@" 2>&1 | tee "$OUT/gpucheck.log"
rc=${PIPESTATUS[0]}
set -e
echo "gpu-check: exit $rc; report in $OUT/gpucheck.md"
exit "$rc"

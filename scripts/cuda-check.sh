#!/usr/bin/env bash
# cuda-check.sh verifies the committed fatbin is current and the kernels
# compile:
#   1. the sha256 of the kernel sources and the nvcc flags in
#      cuda/kernels/kernels.stamp match the sources and scripts/cuda-build.sh
#      (a stale fatbin fails here; no nvcc needed for this step);
#   2. with nvcc present (or --install, which runs scripts/cuda-install.sh),
#      every kernel compiles for every target into a scratch fatbin, and the
#      ptxas register/spill report is printed.
# Bytes are not compared with the committed fatbin: nvcc output is not
# promised to be reproducible across toolkit builds and host compilers.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

want=$(scripts/cuda-build.sh --hash)
stamp=cuda/kernels/kernels.stamp
[ -f "$stamp" ] || { echo "cuda-check: $stamp missing; run scripts/cuda-build.sh" >&2; exit 1; }
have=$(sed -n 's/^sources //p' "$stamp")
if [ "$want" != "$have" ]; then
	echo "cuda-check: kernel sources changed since kernels.fatbin was built (stamp $have, sources $want); run scripts/cuda-build.sh and commit the result" >&2
	exit 1
fi
flags_script=$(bash -c 'source <(sed -n "/^NVCC_FLAGS=/,/^NVCC_FLAGS=\"\$(echo/p" scripts/cuda-build.sh); echo "$NVCC_FLAGS"')
flags_stamp=$(sed -n 's/^flags //p' "$stamp")
if [ "$flags_script" != "$flags_stamp" ]; then
	echo "cuda-check: nvcc flags changed since kernels.fatbin was built; run scripts/cuda-build.sh" >&2
	exit 1
fi
[ -s cuda/kernels/kernels.fatbin ] || { echo "cuda-check: kernels.fatbin missing or empty" >&2; exit 1; }
echo "cuda-check: stamp matches sources and flags ($want)"

if [ "${1:-}" = "--install" ]; then
	scripts/cuda-install.sh
fi
if ! command -v nvcc >/dev/null; then
	echo "cuda-check: nvcc not found; compile step skipped (run with --install)" >&2
	exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
WEFT_FATBIN_OUT="$tmp/check.fatbin" scripts/cuda-build.sh
echo "cuda-check: all kernels compile for sm_80, sm_86, sm_89, sm_90 (+PTX)"

#!/usr/bin/env bash
# cuda-install.sh installs Debian's nvidia-cuda-toolkit (nvcc 11.8, component
# non-free) so scripts/cuda-build.sh and scripts/cuda-check.sh can compile the
# kernels. Idempotent: it does nothing when nvcc is already on PATH, and adds
# "non-free" to the Components of the deb822 sources only once.
#
# Nothing here is needed to `go build` weft: the cgo shim loads libcuda and
# cuBLAS at run time and the fatbin is committed (cuda/kernels/kernels.fatbin).
set -euo pipefail

if command -v nvcc >/dev/null 2>&1; then
	echo "cuda-install: nvcc already present: $(nvcc --version | tail -n 2 | head -n 1)"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi

src=/etc/apt/sources.list.d/debian.sources
if [ -f "$src" ]; then
	# Add non-free (and non-free-firmware, which the toolkit does not need but is
	# harmless) to every Components line that lacks it.
	if grep -q '^Components:' "$src" && grep '^Components:' "$src" | grep -vq 'non-free'; then
		$SUDO sed -i -E '/^Components:/{/non-free/!s/$/ contrib non-free/}' "$src"
	fi
elif [ -f /etc/apt/sources.list ]; then
	$SUDO sed -i -E '/^deb /{/non-free/!s/$/ contrib non-free/}' /etc/apt/sources.list
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends nvidia-cuda-toolkit
nvcc --version

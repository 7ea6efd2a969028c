#!/usr/bin/env bash
# proto-check.sh: the API's CI gate. Run from anywhere; needs only the Go
# module cache (buf and the protoc plugins are Go tools pinned in tools/go.mod).
#
#  1. buf lint (STANDARD rules, buf.yaml).
#  2. buf breaking against the last released API: the committed image
#     proto/image.binpb, or (when there is none) the parent commit.
#  3. Regenerates api/ into a temporary directory and fails if it differs from
#     the committed api/ (someone edited the .proto and forgot to regenerate,
#     or edited generated code by hand).
#
# After an intended, compatible API change, refresh the image with
#   go tool -modfile=tools/go.mod buf build -o proto/image.binpb
set -euo pipefail

cd "$(dirname "$0")/.."
buf() { go tool -modfile=tools/go.mod buf "$@"; }

echo "proto-check: buf lint"
buf lint

echo "proto-check: buf breaking"
# The baseline is the committed image of the last released API,
# proto/image.binpb; without one, the parent commit's proto/ (on main: the
# previous commit of main).
against=""
if [[ -f proto/image.binpb ]]; then
	against="proto/image.binpb"
elif git rev-parse --verify --quiet HEAD~1 >/dev/null 2>&1 &&
	git cat-file -e HEAD~1:buf.yaml 2>/dev/null; then
	# buf.yaml sits at the repository root, so the ref's whole tree is the
	# workspace to compare with.
	against=".git#ref=HEAD~1"
fi
if [[ -n "$against" ]]; then
	echo "proto-check:   against $against"
	buf breaking --against "$against"
else
	echo "proto-check:   no previous API to compare with (no proto/image.binpb, no parent commit)"
fi

echo "proto-check: regenerate api/ and compare"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
buf generate -o "$tmp"
if ! diff -r -u api "$tmp/api"; then
	echo "proto-check: api/ is stale: run 'go tool -modfile=tools/go.mod buf generate' and commit the result" >&2
	exit 1
fi
echo "proto-check: ok"

#!/usr/bin/env bash
# readme-replay.sh: runs README.md's shell blocks, in order, as a newcomer
# would type them, on a fresh clone of this repository with an empty GOCACHE
# and a temporary GOPATH (so modules come from the proxy and everything is
# compiled from scratch). Fails if any command fails. CI runs it.
#
#   scripts/readme-replay.sh [README]     (default: README.md of HEAD)
#
# What it does with the blocks:
#   - every ```sh block runs, in one bash process, so a server started in one
#     block serves the next, and `export PATH=...` carries over;
#   - a block preceded by the line `<!-- readme-replay: skip REASON -->` is
#     not run; the reason is printed (a Docker engine, a model file the
#     project does not ship, CI itself);
#   - `weft serve ...` and `go run ./cmd/weft serve ...` start in the
#     background: the next command runs once `weft healthcheck` reports
#     SERVING, and a later serve first stops the one before (SIGTERM, which
#     must exit 0 after its drain);
#   - commands that run until stopped are bounded, and say so: `weft chat`
#     reads one line and then end of input; `go test -fuzz` gets
#     -fuzztime=50000x (a count: Go 1.26's fuzz coordinator can report a
#     duration's end as "context deadline exceeded", golang/go#75804, a
#     race fixed in Go 1.27); `go test -bench` gets -benchtime=1x; `go test -race
#     ./...` and `bash .ci/run` are not repeated (CI runs them itself).
# The clone sits beside a link to the shared data, so ../shared resolves as
# in the README.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
readme="${1:-}"
shared="${WEFT_SHARED:-$repo/../shared}"
shared="$(cd "$shared" && pwd)"
export PATH="/usr/local/go/bin:$PATH"

work="$(mktemp -d)"
cleanup() {
	rm -rf "$work" 2>/dev/null || { chmod -R u+w "$work" && rm -rf "$work"; }
}
trap cleanup EXIT

git clone -q "$repo" "$work/weft"
ln -s "$shared" "$work/shared"
if [[ -z "$readme" ]]; then readme="$work/weft/README.md"; fi
export GOCACHE="$work/gocache" GOPATH="$work/gopath" GOFLAGS="${GOFLAGS:-}"
export WEFT_SHARED="$work/shared"
mkdir -p "$GOCACHE" "$GOPATH"

# Extract the blocks: one file per block, the skip reason (if any) beside it.
mkdir -p "$work/blocks"
awk -v dir="$work/blocks" '
	/^<!-- readme-replay: skip / { skip = $0; sub(/^<!-- readme-replay: skip /, "", skip); sub(/ *-->$/, "", skip); next }
	/^```(sh|bash)$/ && !inb { inb = 1; n++; f = sprintf("%s/%03d.sh", dir, n); printf "" > f
		if (skip != "") { print skip > (f ".skip") }; skip = ""; next }
	/^```/ && inb { inb = 0; close(f); next }
	inb { print >> f; next }
	/[^ ]/ { skip = "" }
' "$readme"

cat >"$work/prelude.sh" <<'PRELUDE'
set -euo pipefail
WEFT_REPLAY_SERVER=""
replay_stop() {
	if [[ -n "$WEFT_REPLAY_SERVER" ]]; then
		echo "replay: stopping the server (SIGTERM)"
		# `go run` does not pass SIGTERM on: signal the program it runs.
		local kids
		kids="$(pgrep -P "$WEFT_REPLAY_SERVER" || true)"
		kill -TERM ${kids:-$WEFT_REPLAY_SERVER}
		local rc=0
		wait "$WEFT_REPLAY_SERVER" || rc=$?
		WEFT_REPLAY_SERVER=""
		if [[ $rc -ne 0 ]]; then echo "replay: the server exited $rc after SIGTERM" >&2; return 1; fi
	fi
}
# replay_kill: on any exit of the replay, a failed block's included, no
# server it started outlives it (it would hold the ports of the next run).
replay_kill() {
	if [[ -n "$WEFT_REPLAY_SERVER" ]]; then
		local kids
		kids="$(pgrep -P "$WEFT_REPLAY_SERVER" || true)"
		kill -TERM $kids "$WEFT_REPLAY_SERVER" 2>/dev/null || true
	fi
}
trap replay_kill EXIT
replay_wait_serving() {
	local i
	for i in $(seq 1 600); do
		if ! kill -0 "$WEFT_REPLAY_SERVER" 2>/dev/null; then
			echo "replay: the server exited before serving" >&2; return 1
		fi
		if command weft healthcheck --timeout 1s >/dev/null 2>&1 ||
			(cd "$REPLAY_CLONE" && command go run ./cmd/weft healthcheck --timeout 1s >/dev/null 2>&1); then
			echo "replay: server SERVING"; return 0
		fi
		sleep 0.5
	done
	echo "replay: the server did not report SERVING" >&2; return 1
}
replay_serve() { # replay_serve CMD...
	replay_stop
	echo "replay: starting in the background: $*"
	"$@" >"$REPLAY_LOGS/serve.$$.$RANDOM.log" 2>&1 &
	WEFT_REPLAY_SERVER=$!
	replay_wait_serving
}
weft() {
	case "${1:-}" in
	serve) replay_serve command weft "$@" ;;
	chat) echo "replay: weft chat reads one line, then end of input"; printf 'Hello!\n' | command weft "$@" ;;
	*) command weft "$@" ;;
	esac
}
go() {
	if [[ "${1:-}" == run && "${2:-}" == ./cmd/weft && "${3:-}" == serve ]]; then
		replay_serve command go "$@"; return
	fi
	if [[ "${1:-}" == test ]]; then
		local a
		for a in "$@"; do
			case "$a" in
			-fuzz) echo "replay: go test -fuzz bounded to 50000 inputs"; command go "$@" -fuzztime=50000x; return ;;
			-bench) echo "replay: go test -bench bounded to one iteration"; command go "$@" -benchtime=1x; return ;;
			esac
		done
		if [[ " $* " == *" -race "* && " $* " == *" ./... "* ]]; then
			echo "replay: not repeating the whole test suite (CI runs it): go $*"; return
		fi
	fi
	command go "$@"
}
bash() {
	if [[ "${1:-}" == .ci/run ]]; then echo "replay: not running CI inside CI"; return; fi
	command bash "$@"
}
PRELUDE

mkdir -p "$work/logs"
{
	echo "source '$work/prelude.sh'"
	echo "REPLAY_LOGS='$work/logs'; REPLAY_CLONE='$work/weft'"
	echo "cd '$work/weft'"
	for f in "$work"/blocks/*.sh; do
		n="$(basename "$f" .sh)"
		if [[ -f "$f.skip" ]]; then
			printf 'echo "==== README block %s: skipped: %s"\n' "$n" "$(sed 's/"/\\"/g' "$f.skip")"
			continue
		fi
		printf 'echo "==== README block %s"\n' "$n"
		printf "sed 's/^/\\$ /' <<'REPLAY_BLOCK_END'\n"
		cat "$f"
		printf 'REPLAY_BLOCK_END\n'
		cat "$f"
		printf '\n'
	done
	echo "replay_stop"
	echo 'echo "==== readme-replay: every block ran"'
} >"$work/replay.sh"

status=0
command bash "$work/replay.sh" || status=$?
if [[ $status -ne 0 ]]; then
	echo "readme-replay: FAILED (exit $status); server logs:" >&2
	for l in "$work"/logs/*.log; do [[ -f "$l" ]] && { echo "--- $l" >&2; tail -20 "$l" >&2; }; done
fi
exit $status

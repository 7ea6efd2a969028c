#!/usr/bin/env bash
# bench-ab.sh: two weft builds on the same serving workload, alternating.
#
# Builds weft at two git revisions (or takes two binaries), then, round after
# round, starts `weft serve` from each in turn (A B, then B A, then A B...) with
# the same serve flags on a free loopback port, runs the same `weft bench`
# workload (same seed; the client is always B's binary, so only the server
# differs) against it, and stops it. Prints each round's figures
# and `weft bench --compare` of every round's pair (B over A; > 1: B better),
# then the output tokens/s ratio of each round and of the sums. Use it to show
# that a change costs nothing on the serving path: the noise of a shared
# machine moves single runs by more than most changes, so only alternating
# rounds tell them apart.
#
# usage: scripts/bench-ab.sh (--a-rev REV | --a BIN) (--b-rev REV | --b BIN)
#            [--rounds N] [--out DIR] [--lock FILE] [--serve "FLAGS"] -- weft-bench-flags...
#
#   --a-rev REV, --b-rev REV  git revisions to build (a worktree each, under --out)
#   --a BIN, --b BIN          weft binaries instead
#   --rounds N                rounds (default 3); each runs A and B once
#   --serve "FLAGS"           flags for `weft serve` (default: the built-in model); --addr,
#                             --metrics-addr and --http-addr are set here
#   --out DIR                 results, logs and builds (default: a temp dir)
#   --lock FILE               hold an flock on FILE during each run (other heavy jobs wait)
#   -- ...                    the `weft bench` flags (the workload); --addr, --format and
#                             --wait-ready are set here
#
# Example (the seed workload, then 16 streams of synth-110m-Q8_0):
#   scripts/bench-ab.sh --a-rev 245fd40 --b-rev main --serve "--model ../shared/models/stories260K.gguf --max-seqs 8" \
#       -- --workload seed --requests 240 --concurrency 8 --seed 1
#   scripts/bench-ab.sh --a-rev 245fd40 --b-rev main --serve "--model synth-110m-Q8_0.gguf --max-seqs 16" \
#       -- --concurrency 16 --duration 20s --warmup 16 --prompt-len 16 --output-len 200 --seed 1
#
# Exit status: non-zero when a build or a server fails or a run has failed requests.
set -euo pipefail

a="" b="" arev="" brev="" rounds=3 out="" lock="" serve=""
bench=()
while [[ $# -gt 0 ]]; do
	case "$1" in
	--a) a="$2"; shift 2 ;;
	--b) b="$2"; shift 2 ;;
	--a-rev) arev="$2"; shift 2 ;;
	--b-rev) brev="$2"; shift 2 ;;
	--rounds) rounds="$2"; shift 2 ;;
	--out) out="$2"; shift 2 ;;
	--lock) lock="$2"; shift 2 ;;
	--serve) serve="$2"; shift 2 ;;
	--) shift; bench=("$@"); break ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench-ab: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
if [[ -z "$a" && -z "$arev" ]] || [[ -z "$b" && -z "$brev" ]]; then
	echo "bench-ab: give --a or --a-rev, and --b or --b-rev (try --help)" >&2
	exit 2
fi
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench-ab: --rounds must be a positive integer" >&2; exit 2; }

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${out:-$(mktemp -d "${TMPDIR:-/tmp}/weft-ab.XXXXXX")}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# build NAME REV: a worktree of REV under $out and its weft; prints the binary.
build() {
	local name="$1" rev="$2" dir="$out/src-$1"
	local sha
	sha="$(git -C "$root" rev-parse --verify "$rev^{commit}")"
	if [[ ! -d "$dir" ]]; then
		git -C "$root" worktree add --detach "$dir" "$sha" >/dev/null 2>&1
	else
		git -C "$dir" checkout --detach -q "$sha"
	fi
	echo "== building $name at $rev ($sha)" >&2
	(cd "$dir" && go build -o "$out/weft-$name" ./cmd/weft)
	echo "$out/weft-$name"
}
cleanup_worktrees() {
	for n in a b; do
		[[ -d "$out/src-$n" ]] && git -C "$root" worktree remove --force "$out/src-$n" 2>/dev/null || true
	done
}
[[ -n "$arev" ]] && a="$(build a "$arev")"
[[ -n "$brev" ]] && b="$(build b "$brev")"
cleanup_worktrees
"$a" version >"$out/a.version" 2>&1 || true
"$b" version >"$out/b.version" 2>&1 || true

server_pid=""
bench_pid=""
stop_server() {
	if [[ -n "$bench_pid" ]]; then
		kill "$bench_pid" 2>/dev/null || true
		wait "$bench_pid" 2>/dev/null || true
		bench_pid=""
	fi
	if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill "$server_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	server_pid=""
}
trap stop_server EXIT
trap 'stop_server; exit 130' INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# run BIN NAME: serve from BIN, bench, write $out/NAME.json.
run() {
	local bin="$1" name="$2" port mport rc=0
	port="$(free_port)"
	mport="$(free_port)"
	# shellcheck disable=SC2086 # --serve is a flag list
	"$bin" serve $serve --addr "127.0.0.1:$port" --metrics-addr "127.0.0.1:$mport" --http-addr "" \
		>"$out/$name.server.log" 2>&1 &
	server_pid=$!
	sleep 0.2
	if ! kill -0 "$server_pid" 2>/dev/null; then
		echo "bench-ab: the $name server exited at once; its log ($out/$name.server.log):" >&2
		cat "$out/$name.server.log" >&2
		exit 1
	fi
	"$b" bench --addr "127.0.0.1:$port" --wait-ready 300s --format json --no-progress \
		${bench[@]+"${bench[@]}"} >"$out/$name.json" 2>"$out/$name.bench.err" &
	bench_pid=$!
	wait "$bench_pid" || rc=$?
	bench_pid=""
	stop_server
	if [[ $rc -ne 0 ]]; then
		echo "bench-ab: the $name run failed (exit $rc); see $out/$name.json, $out/$name.bench.err, $out/$name.server.log" >&2
		exit "$rc"
	fi
}

# locked BIN NAME: run under the lock when one is given.
locked() {
	if [[ -n "$lock" ]]; then
		exec 9>"$lock"
		flock 9
		run "$@"
		flock -u 9
		exec 9>&-
	else
		run "$@"
	fi
}

echo "== A: $(head -1 "$out/a.version")"
echo "== B: $(head -1 "$out/b.version")"
echo "== serve: $serve"
echo "== bench: ${bench[*]-}"
for r in $(seq "$rounds"); do
	if (( r % 2 == 1 )); then order=(a b); else order=(b a); fi
	for x in "${order[@]}"; do
		echo "== round $r: $x" >&2
		if [[ "$x" == a ]]; then locked "$a" "r$r-a"; else locked "$b" "r$r-b"; fi
	done
	echo "== round $r: B over A"
	"$b" bench --compare "$out/r$r-b.json,$out/r$r-a.json" | tee "$out/r$r-compare.txt"
done

# Output tokens/s per round and over all rounds (sum of B over sum of A).
python3 - "$out" "$rounds" <<'EOF'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def tps(path):
    with open(path) as f:
        return float(json.load(f)["output_tokens_per_second"])
sa = sb = 0.0
print("output tokens/s, A and B, per round:")
for r in range(1, rounds + 1):
    a, b = tps(f"{out}/r{r}-a.json"), tps(f"{out}/r{r}-b.json")
    sa += a; sb += b
    print(f"  round {r}: A {a:.1f}  B {b:.1f}  B/A {b/a:.3f}")
print(f"  all rounds: B/A {sb/sa:.3f} (sum over sum)")
EOF
echo "(results in $out)"

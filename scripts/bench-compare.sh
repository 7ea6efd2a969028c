#!/usr/bin/env bash
# bench-compare.sh: continuous versus static batching on the same workload.
#
# Starts `weft serve` twice on a free loopback port, first with continuous
# batching (--max-seqs N), then with static batching at the same batch
# capacity (--batching static --batch-size N), runs the same `weft bench`
# workload (same seed) against each, and prints the ratios (continuous over
# static; > 1 means continuous is better): output tokens/s, p50 end-to-end
# latency of the shortest requests, p99 TTFT, and more. The servers are
# killed on exit, whatever happens.
#
# usage: scripts/bench-compare.sh [--model PATH] [--capacity N] [--workload seed|chat]
#            [--requests R] [--concurrency C] [--out DIR] [--weft BIN] [-- weft-bench-flags...]
#
#   --model PATH     GGUF model to serve (default: the built-in synthetic model)
#   --capacity N     batch capacity of both servers (default 8)
#   --workload W     seed: 16-token prompts, outputs cycling 6,50,300 (default)
#                    chat: lognormal chat-like prompts and replies
#   --requests R     measured requests per run (default 96)
#   --concurrency C  closed-loop clients (default: the capacity)
#   --out DIR        where the JSON results and server logs go (default: a temp dir)
#   --weft BIN       weft binary to use (default: built from this checkout)
#   -- ...           further flags for `weft bench` (e.g. --rate 20 --slo-ttft 200ms)
#
# Exit status: non-zero when a server fails to start or a run has failed requests.
set -euo pipefail

model=""
capacity=8
workload=seed
requests=96
concurrency=""
out=""
weft=""
extra=()
while [[ $# -gt 0 ]]; do
	case "$1" in
	--model) model="$2"; shift 2 ;;
	--capacity) capacity="$2"; shift 2 ;;
	--workload) workload="$2"; shift 2 ;;
	--requests) requests="$2"; shift 2 ;;
	--concurrency) concurrency="$2"; shift 2 ;;
	--out) out="$2"; shift 2 ;;
	--weft) weft="$2"; shift 2 ;;
	--) shift; extra=("$@"); break ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench-compare: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
concurrency="${concurrency:-$capacity}"
case "$workload" in
seed) wflags=(--workload seed) ;;
chat) wflags=(--workload chat) ;;
*) echo "bench-compare: --workload must be seed or chat" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${out:-$(mktemp -d "${TMPDIR:-/tmp}/weft-bench.XXXXXX")}"
mkdir -p "$out"
if [[ -z "$weft" ]]; then
	weft="$out/weft"
	(cd "$root" && go build -o "$weft" ./cmd/weft)
fi

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

# free_port prints a loopback TCP port nothing listens on.
free_port() {
	if command -v python3 >/dev/null; then
		python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
		return
	fi
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
}

# run NAME SERVE-FLAGS...: serve with the flags, bench, write $out/NAME.json.
run() {
	local name="$1"; shift
	local port mport
	port="$(free_port)"
	mport="$(free_port)"
	local mflags=()
	[[ -n "$model" ]] && mflags=(--model "$model")
	echo "== $name: weft serve ${mflags[*]} $* --addr 127.0.0.1:$port" >&2
	"$weft" serve "${mflags[@]}" --addr "127.0.0.1:$port" --metrics-addr "127.0.0.1:$mport" --http-addr "" "$@" \
		>"$out/$name.server.log" 2>&1 &
	server_pid=$!
	sleep 0.2
	if ! kill -0 "$server_pid" 2>/dev/null; then
		echo "bench-compare: the $name server exited at once; its log ($out/$name.server.log):" >&2
		cat "$out/$name.server.log" >&2
		exit 1
	fi
	local cmd=("$weft" bench --addr "127.0.0.1:$port" --wait-ready 120s --format json --no-progress
		--requests "$requests" --concurrency "$concurrency" --seed 1 "${wflags[@]}" ${extra[@]+"${extra[@]}"})
	echo "   ${cmd[*]}" >&2
	local rc=0
	# In the background and waited for, so that a signal to this script
	# runs the trap at once.
	"${cmd[@]}" >"$out/$name.json" &
	bench_pid=$!
	wait "$bench_pid" || rc=$?
	bench_pid=""
	stop_server
	if [[ $rc -ne 0 ]]; then
		echo "bench-compare: the $name run failed (exit $rc); result: $out/$name.json, server log: $out/$name.server.log" >&2
		exit "$rc"
	fi
}

run continuous --batching continuous --max-seqs "$capacity"
run static --batching static --batch-size "$capacity"

echo "== continuous vs static, capacity $capacity, workload $workload, $requests requests, concurrency $concurrency (results in $out)"
"$weft" bench --compare "$out/continuous.json,$out/static.json" | tee "$out/compare.txt"
"$weft" bench --compare "$out/continuous.json,$out/static.json" --format json >"$out/compare.json"

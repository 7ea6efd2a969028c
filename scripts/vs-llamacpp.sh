#!/usr/bin/env bash
# vs-llamacpp.sh: weft's CPU runtime against llama.cpp on the same files, side by side.
#
# Prints the CPU (model, family, vector flags, last-level cache) first. Builds llama.cpp outside
# this repository, once with its native flags and, where the CPU has AMX, once more with AMX off
# (AVX-512 on), builds weft, writes the files of one `weft gen-model` preset (synth-110m unless
# --preset names another: llama-3.2-1b, qwen3-0.6b, qwen3-1.7b, gemma3-270m, gemma3-1b, the MoE presets), then runs, round after
# round, for each file: llama-bench (prompt 128, decode 64), llama-batched-bench (decode at 1, 4,
# 16, 64 sequences), `weft bench --engine` (the same shapes), and the whole-process wall time of
# a 128-token greedy run (llama-completion, llama-cli or llama-simple against `weft generate`,
# same prompt). Each round flips which program goes first. It ends with a table of weft /
# llama.cpp ratios per file, round and llama.cpp build: > 1 means weft is faster (wall: llama.cpp
# seconds over weft seconds).
#
# With --depths, it measures decode at those context depths instead: for each depth D and file,
# llama-bench (-d D -p 0 -n 32: one sequence), llama-batched-bench (-npp D -ntg 32 at each --seqs
# count, its context seqs x (D + 32) + 512 tokens) and `weft bench --engine --context D --steps 32`
# (each sequence holds D tokens of KV when the timed steps start), alternating as above, then a
# table of tokens/s and of each figure's share of the bandwidth bound: seqs x the streaming
# bandwidth weft measures / (the file's tensor bytes + seqs x (D + 16) x the KV bytes of one
# token over all layers), the weights and every sequence's KV read once per step (D + 16: the
# middle of the 32 timed steps). --kv-type sets the cache type of both programs there.
#
# usage: scripts/vs-llamacpp.sh [--src DIR] [--llama-build DIR] [--work DIR] [--types "F16 Q8_0 Q4_K_M"]
#            [--preset NAME] [--rounds N] [--threads T] [--seqs LIST] [--prompt TEXT] [--weft BIN] [--lock FILE]
#            [--depths LIST] [--kv-type TYPE]
#
#   --src DIR          llama.cpp source to build (default: the release the npm package
#                      node-llama-cpp@3.22.1 bundles, unpacked under the work directory)
#   --llama-build DIR  a ready llama.cpp build (its bin/ holds llama-bench; missing
#                      llama-batched-bench / llama-cli targets are built there), the only one
#                      compared: nothing else is built (on an AMX CPU give an AMX-off build for Q8_0)
#   --work DIR         build directories, models, logs and results (default /tmp/weft-vs-llamacpp)
#   --types LIST       the preset's types to compare (default "F16 Q8_0 Q4_K_M"; any `weft gen-model --type`:
#                      also Q4_0, Q6_K, IQ4_NL, IQ4_XS, MXFP4, and MXFP4_MOE for the MoE presets)
#   --preset NAME      the `weft gen-model` preset to write and compare (default synth-110m)
#   --rounds N         rounds of every run (default 2)
#   --threads T        threads for both programs (default: nproc)
#   --seqs LIST        sequence counts of the batched decode, comma-separated (default 1,4,16,64)
#   --prompt TEXT      prompt of the 128-token wall-time run (default "Once upon a time")
#   --weft BIN         weft binary to use (default: built from this checkout)
#   --depths LIST      context depths of a decode sweep, comma-separated (e.g. 256,2048,8192); given,
#                      the sweep replaces the prompt / decode / wall comparison
#   --kv-type TYPE     the KV cache type of the depth sweep: f16 (default), or q8_0 (weft --kv-type
#                      q8_0; llama.cpp -ctk q8_0 -ctv q8_0 with flash attention, which that needs)
#   --lock FILE        hold flock(1) on FILE during each program's runs, so that other heavy jobs
#                      sharing the machine and the lock wait between measurements, not during them
#
# Needs cmake (installed with apt-get when missing and a build is needed), a C/C++ compiler, git,
# npm (for the default source), python3 (to read the JSON results) and Go.
set -euo pipefail

src=""
llama_build=""
work=/tmp/weft-vs-llamacpp
types="F16 Q8_0 Q4_K_M"
preset=synth-110m
rounds=2
threads="$(nproc)"
seqs="1,4,16,64"
prompt="Once upon a time"
weft=""
lock=""
depths=""
kvtype=f16
while [[ $# -gt 0 ]]; do
	case "$1" in
	--src) src="$2"; shift 2 ;;
	--llama-build) llama_build="$2"; shift 2 ;;
	--work) work="$2"; shift 2 ;;
	--types) types="$2"; shift 2 ;;
	--preset) preset="$2"; shift 2 ;;
	--rounds) rounds="$2"; shift 2 ;;
	--threads) threads="$2"; shift 2 ;;
	--seqs) seqs="$2"; shift 2 ;;
	--prompt) prompt="$2"; shift 2 ;;
	--weft) weft="$2"; shift 2 ;;
	--lock) lock="$2"; shift 2 ;;
	--depths) depths="$2"; shift 2 ;;
	--kv-type) kvtype="$2"; shift 2 ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "vs-llamacpp: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "vs-llamacpp: --rounds must be a positive count" >&2; exit 2; }
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || { echo "vs-llamacpp: --threads must be a positive count" >&2; exit 2; }
[[ "$seqs" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "vs-llamacpp: --seqs must be counts separated by commas" >&2; exit 2; }
case "$kvtype" in
f16) llama_kv=() ;;
q8_0) llama_kv=(-ctk q8_0 -ctv q8_0) ;;
*) echo "vs-llamacpp: --kv-type must be f16 or q8_0" >&2; exit 2 ;;
esac
[[ -z "$depths" || "$depths" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "vs-llamacpp: --depths must be counts separated by commas" >&2; exit 2; }
maxseqs="$(tr ',' '\n' <<<"$seqs" | sort -n | tail -1)"

root="$(cd "$(dirname "$0")/.." && pwd)"
case "$(realpath -m "$work")/" in
"$root"/*) echo "vs-llamacpp: --work must be outside the repository" >&2; exit 2 ;;
esac
mkdir -p "$work/logs" "$work/models"
work="$(cd "$work" && pwd)"

# The CPU first: the figures mean nothing without it.
cpuinfo() { grep -m1 "^$1" /proc/cpuinfo | sed 's/^[^:]*: //'; }
echo "== CPU"
echo "model:   $(cpuinfo 'model name')"
echo "family:  $(cpuinfo 'cpu family'), model $(cpuinfo 'model'), stepping $(cpuinfo 'stepping'); $(nproc) CPUs online, $threads threads used"
vecflags="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(sse4_2|avx|avx2|fma|f16c|avx512.*|avx_vnni|amx.*)$' | tr '\n' ' ')"
echo "flags:   $vecflags"
llc=""
for d in /sys/devices/system/cpu/cpu0/cache/index*; do
	[[ -r "$d/level" && -r "$d/size" ]] || continue # some guests list no caches in sysfs
	[[ "$(cat "$d/type" 2>/dev/null)" == Instruction ]] && continue
	llc="L$(cat "$d/level") $(cat "$d/size")"
done
if [[ -n "$llc" ]]; then
	echo "cache:   last level $llc (cpu0)"
else
	# No sysfs cache entries: glibc's figure comes from cpuid and may be the whole package's L3,
	# not the slice one core shares; weft's bound then uses the streaming bandwidth.
	l3="$(getconf LEVEL3_CACHE_SIZE 2>/dev/null || true)"
	echo "cache:   not in sysfs; getconf LEVEL3_CACHE_SIZE ${l3:-unknown} bytes (cpuid: may count the whole package)"
fi
echo "kernel:  $(uname -sr)"
amx=no
if grep -q -o amx_tile /proc/cpuinfo; then amx=yes; fi
echo "AMX:     $amx"
echo

need() { command -v "$1" >/dev/null || { echo "vs-llamacpp: needs $1" >&2; exit 1; }; }
need python3
need go

# llama.cpp: the source, then the builds. builds holds label=dir pairs.
noamx_flags=(-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF)
get_source() {
	[[ -n "$src" ]] && return
	src="$work/llama.cpp"
	if [[ ! -f "$src/CMakeLists.txt" ]]; then
		need npm
		need git
		echo "== llama.cpp source: node-llama-cpp@3.22.1's bundled release"
		(cd "$work" && npm pack --silent node-llama-cpp@3.22.1 >/dev/null &&
			rm -rf package && tar xzf node-llama-cpp-3.22.1.tgz &&
			git -c advice.detachedHead=false clone -q package/llama/gitRelease.bundle llama.cpp)
	fi
	echo "llama.cpp source: $src ($(git -C "$src" describe --tags --always 2>/dev/null || echo 'no git tag'))"
}
# wall_tool names the 128-token greedy program a build has (the first of llama-completion,
# llama-cli, llama-simple), empty if none.
wall_tool() {
	local t
	for t in llama-completion llama-cli llama-simple; do
		if [[ -x "$1/bin/$t" ]]; then echo "$t"; return; fi
	done
}
# build_llama DIR [cmake flags...]: configures DIR when it has no cache yet and builds the
# targets this script runs (those the source has).
build_llama() {
	local dir="$1"
	shift
	if [[ ! -f "$dir/CMakeCache.txt" ]]; then
		get_source
		if ! command -v cmake >/dev/null; then
			echo "== installing cmake"
			apt-get install -y cmake >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y cmake >/dev/null; }
		fi
		cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF "$@" >"$work/logs/cmake-$(basename "$dir").log"
	fi
	local srcdir targets=(llama-bench llama-batched-bench)
	srcdir="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$dir/CMakeCache.txt")"
	if [[ -d "$srcdir/tools/completion" || -d "$srcdir/examples/completion" ]]; then
		targets+=(llama-completion)
	else
		targets+=(llama-cli)
	fi
	local t missing=()
	for t in "${targets[@]}"; do [[ -x "$dir/bin/$t" ]] || missing+=("$t"); done
	if [[ ${#missing[@]} -gt 0 ]]; then
		echo "== building ${missing[*]} in $dir (minutes)"
		cmake --build "$dir" -j "$(nproc)" --target "${missing[@]}" >"$work/logs/build-$(basename "$dir").log" 2>&1 ||
			{ echo "vs-llamacpp: build failed, see $work/logs/build-$(basename "$dir").log" >&2; exit 1; }
	fi
	[[ -n "$(wall_tool "$dir")" ]] || { echo "vs-llamacpp: $dir has no llama-completion, llama-cli or llama-simple" >&2; exit 1; }
}
builds=()
if [[ -n "$llama_build" ]]; then
	build_llama "$(cd "$llama_build" && pwd)"
	builds+=("$(basename "$llama_build")=$(cd "$llama_build" && pwd)")
else
	build_llama "$work/build-native" -DGGML_NATIVE=ON
	builds+=("native=$work/build-native")
fi
if [[ "$amx" == yes && -z "$llama_build" ]]; then
	build_llama "$work/build-noamx" "${noamx_flags[@]}"
	builds+=("no-AMX=$work/build-noamx")
fi

# weft and the model files.
if [[ -z "$weft" ]]; then
	echo "== building weft"
	weft="$work/weft"
	(cd "$root" && go build -o "$weft" ./cmd/weft)
fi
echo "weft: $("$weft" version 2>&1 | tr '\n' ' ')"
shared="${WEFT_SHARED:-$root/../shared}"
vocab=()
if [[ -f "$shared/vocab/ggml-vocab-llama-spm.gguf" ]]; then vocab=(--vocab "$shared/vocab/ggml-vocab-llama-spm.gguf"); fi
for t in $types; do
	f="$work/models/$preset-$t.gguf"
	if [[ ! -s "$f" ]]; then
		echo "== writing $f"
		"$weft" gen-model --out "$f" --preset "$preset" --type "$t" "${vocab[@]}" >/dev/null
	fi
done
echo

# Results: one line per figure, "round type who metric value" (who: weft or a build's label;
# metrics: prompt, d1, d4, d16, d64 in tokens/s; wall in seconds).
results="$work/results.txt"
: >"$results"
record() { echo "$*" >>"$results"; }
# seconds runs a command and prints its wall time in seconds (its stdout to the log named first,
# its stderr to that name plus .err).
seconds() {
	local log="$1" t0 t1
	shift
	t0=$(date +%s%N)
	"$@" </dev/null >"$log" 2>"$log.err" || { echo "vs-llamacpp: failed: $* (see $log.err)" >&2; exit 1; }
	t1=$(date +%s%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'
}

run_llama() { # round type label dir
	local r="$1" t="$2" label="$3" dir="$4" f="$work/models/$preset-$2.gguf" log="$work/logs/r$1-$2-$3"
	echo "round $r $t: llama.cpp ($label)"
	"$dir/bin/llama-bench" -m "$f" -p 128 -n 64 -r 3 -t "$threads" -o json >"$log-bench.json" 2>"$log-bench.err" ||
		{ echo "vs-llamacpp: llama-bench failed (see $log-bench.err)" >&2; exit 1; }
	python3 - "$log-bench.json" "$r $t $label" >>"$results" <<'EOF'
import json, sys
for e in json.load(open(sys.argv[1])):
    if e["n_prompt"] > 0 and e["n_gen"] == 0:
        print(sys.argv[2], "prompt", e["avg_ts"])
    elif e["n_gen"] > 0 and e["n_prompt"] == 0:
        print(sys.argv[2], "tg64", e["avg_ts"])
EOF
	"$dir/bin/llama-batched-bench" -m "$f" -c $((maxseqs * 192 + 512)) -b 2048 -ub 512 -npp 128 -ntg 64 -npl "$seqs" \
		-t "$threads" --output-format jsonl >"$log-batched.txt" 2>&1 </dev/null ||
		{ echo "vs-llamacpp: llama-batched-bench failed (see $log-batched.txt)" >&2; exit 1; }
	python3 - "$log-batched.txt" "$r $t $label" >>"$results" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith('{"n_kv_max"'):
        e = json.loads(line)
        print(sys.argv[2], "d%d" % e["pl"], e["speed_tg"])
EOF
	local tool s
	tool="$(wall_tool "$dir")"
	case "$tool" in
	llama-simple) s=$(seconds "$log-wall.txt" "$dir/bin/llama-simple" -m "$f" -n 128 "$prompt") ;;
	llama-completion) s=$(seconds "$log-wall.txt" "$dir/bin/llama-completion" -m "$f" -p "$prompt" -n 128 -t "$threads" --temp 0 -no-cnv) ;;
	*) s=$(seconds "$log-wall.txt" "$dir/bin/llama-cli" -m "$f" -p "$prompt" -n 128 -t "$threads" --temp 0 -no-cnv) ;;
	esac
	record "$r $t $label wall $s"
	# llama.cpp's timings count the decode steps after the first token.
	local runs
	runs="$(sed -n 's/.* eval time = .* \/ *\([0-9]*\) runs.*/\1/p' "$log-wall.txt" "$log-wall.txt.err" | grep -v '^$' | tail -1 || true)"
	if [[ -n "$runs" ]]; then record "$r $t $label wall_tokens $((runs + 1))"; fi
}

run_weft() { # round type
	local r="$1" t="$2" f="$work/models/$preset-$2.gguf" log="$work/logs/r$1-$2-weft"
	echo "round $r $t: weft"
	GOMAXPROCS="$threads" "$weft" bench --engine --model "$f" --seqs "$seqs" --steps 64 --context 128 \
		--prompt 128 --format json >"$log-bench.json" 2>"$log-bench.err" ||
		{ echo "vs-llamacpp: weft bench failed (see $log-bench.err)" >&2; exit 1; }
	python3 - "$log-bench.json" "$r $t weft" >>"$results" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for e in d["results"]:
    if e["name"].startswith("prompt"):
        print(sys.argv[2], "prompt", e["tokens_per_second"])
    else:
        print(sys.argv[2], "d%d" % e["seqs"], e["tokens_per_second"])
EOF
	local s
	s=$(seconds "$log-wall.json" "$weft" generate --model "$f" --prompt "$prompt" --max-tokens 128 --temperature 0 \
		--threads "$threads" --backend cpu --format json)
	record "$r $t weft wall $s"
	record "$r $t weft wall_tokens $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["token_ids"]))' "$log-wall.json")"
}

# locked runs a measurement under --lock's flock (when given).
locked() {
	if [[ -z "$lock" ]]; then
		"$@"
		return
	fi
	exec {fd}>>"$lock"
	flock "$fd"
	"$@"
	flock -u "$fd"
	exec {fd}>&-
}
# The depth sweep: decode at each context depth, 32 timed steps.
dsteps=32
depth_llama() { # round type label dir depth
	local r="$1" t="$2" label="$3" dir="$4" d="$5" f="$work/models/$preset-$2.gguf" log="$work/logs/r$1-$2-$3-d$5"
	echo "round $r $t depth $d: llama.cpp ($label)"
	local fa=()
	if [[ "$kvtype" != f16 ]]; then fa=(-fa on); fi
	"$dir/bin/llama-bench" -m "$f" -d "$d" -p 0 -n "$dsteps" -r 2 -t "$threads" "${llama_kv[@]}" "${fa[@]}" -o json >"$log-bench.json" 2>"$log-bench.err" ||
		{ echo "vs-llamacpp: llama-bench failed (see $log-bench.err)" >&2; exit 1; }
	python3 - "$log-bench.json" "$r $t $label" "$d" >>"$results" <<'EOF'
import json, sys
for e in json.load(open(sys.argv[1])):
    if e["n_gen"] > 0 and e["n_prompt"] == 0:
        print(sys.argv[2], "tg@%s" % sys.argv[3], e["avg_ts"])
EOF
	if [[ "$kvtype" != f16 ]]; then fa=(-fa on); fi
	"$dir/bin/llama-batched-bench" -m "$f" -c $((maxseqs * (d + dsteps) + 512)) -b 2048 -ub 512 -npp "$d" -ntg "$dsteps" \
		-npl "$seqs" -t "$threads" "${llama_kv[@]}" "${fa[@]}" --output-format jsonl >"$log-batched.txt" 2>&1 </dev/null ||
		{ echo "vs-llamacpp: llama-batched-bench failed (see $log-batched.txt)" >&2; exit 1; }
	python3 - "$log-batched.txt" "$r $t $label" "$d" >>"$results" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith('{"n_kv_max"'):
        e = json.loads(line)
        print(sys.argv[2], "d%d@%s" % (e["pl"], sys.argv[3]), e["speed_tg"])
EOF
}
depth_weft() { # round type depth
	local r="$1" t="$2" d="$3" f="$work/models/$preset-$2.gguf" log="$work/logs/r$1-$2-weft-d$3"
	echo "round $r $t depth $d: weft"
	GOMAXPROCS="$threads" "$weft" bench --engine --model "$f" --seqs "$seqs" --steps "$dsteps" --context "$d" \
		--prompt 16 --prompt-reps 1 --kv-type "$kvtype" --format json >"$log-bench.json" 2>"$log-bench.err" ||
		{ echo "vs-llamacpp: weft bench failed (see $log-bench.err)" >&2; exit 1; }
	python3 - "$log-bench.json" "$r $t weft" "$d" "$dsteps" >>"$results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
d, steps = int(sys.argv[3]), int(sys.argv[4])
bw = j["stream_bandwidth_gbs"] * 1e9
print(sys.argv[2], "bw@%d" % d, j["stream_bandwidth_gbs"])
for e in j["results"]:
    if e["name"] == "decode":
        n = e["seqs"]
        step_bytes = j["weight_bytes"] + n * (d + steps // 2) * j["kv_bytes_per_token"]
        print(sys.argv[2], "d%d@%d" % (n, d), e["tokens_per_second"])
        print(sys.argv[2], "bound%d@%d" % (n, d), n * bw / step_bytes)
EOF
}
if [[ -n "$depths" ]]; then
	for ((r = 1; r <= rounds; r++)); do
		for t in $types; do
			for d in ${depths//,/ }; do
				if ((r % 2 == 0)); then locked depth_weft "$r" "$t" "$d"; fi
				for b in "${builds[@]}"; do locked depth_llama "$r" "$t" "${b%%=*}" "${b#*=}" "$d"; done
				if ((r % 2 == 1)); then locked depth_weft "$r" "$t" "$d"; fi
			done
		done
	done
	echo
	python3 - "$results" "$seqs" <<'EOF'
import sys
vals, order = {}, []
for line in open(sys.argv[1]):
    r, t, who, metric, v = line.split()
    vals[(r, t, who, metric)] = float(v)
    if (r, t) not in order:
        order.append((r, t))
seqs = [int(s) for s in sys.argv[2].split(",")]
labels = sorted({k[2] for k in vals if k[2] != "weft"})
depths = sorted({int(k[3].split("@")[1]) for k in vals if "@" in k[3]})
def cell(x):
    return "-" if x is None else ("%.1f" % x if x >= 10 else "%.2f" % x)
def pct(x, b):
    return "-" if x is None or not b else "%.0f%%" % (100 * x / b)
print("Decode at depth (tokens/s; bound: seqs x streaming GB/s / (weight bytes + seqs x (depth + 16) x KV bytes per token));")
print("llama.cpp at 1 sequence: llama-bench -d DEPTH -n 32 -p 0; at N: llama-batched-bench -npp DEPTH -ntg 32 -npl N")
print("| round | file | depth | seqs | weft t/s | weft % of bound | " + " | ".join("llama.cpp %s t/s | llama.cpp %s %% of bound | weft / llama.cpp %s" % (l, l, l) for l in labels) + " | bound t/s |")
print("|---|---|---|---|---|---|" + "---|---|---|" * len(labels) + "---|")
for r, t in order:
    for d in depths:
        for n in seqs:
            w = vals.get((r, t, "weft", "d%d@%d" % (n, d)))
            b = vals.get((r, t, "weft", "bound%d@%d" % (n, d)))
            cells = [cell(w), pct(w, b)]
            for l in labels:
                x = vals.get((r, t, l, "tg@%d" % d)) if n == 1 else None
                if x is None:
                    x = vals.get((r, t, l, "d%d@%d" % (n, d)))
                cells += [cell(x), pct(x, b), "-" if not w or not x else "%.2f" % (w / x)]
            print("| %s | %s | %d | %d | %s | %s |" % (r, t, d, n, " | ".join(cells), cell(b)))
bws = sorted({v for k, v in vals.items() if k[3].startswith("bw@")})
if bws:
    print("streaming bandwidth weft measured (GB/s): %s" % ", ".join("%.1f" % x for x in bws))
EOF
	echo
	echo "results: $results; logs: $work/logs"
	exit 0
fi

for ((r = 1; r <= rounds; r++)); do
	for t in $types; do
		# Alternate: llama.cpp first in odd rounds, weft first in even ones.
		if ((r % 2 == 0)); then locked run_weft "$r" "$t"; fi
		for b in "${builds[@]}"; do locked run_llama "$r" "$t" "${b%%=*}" "${b#*=}"; done
		if ((r % 2 == 1)); then locked run_weft "$r" "$t"; fi
	done
done
echo

python3 - "$results" <<'EOF'
import sys
vals = {}
order = []
for line in open(sys.argv[1]):
    r, t, who, metric, v = line.split()
    vals[(r, t, who, metric)] = float(v)
    if (r, t) not in order:
        order.append((r, t))
labels = sorted({k[2] for k in vals if k[2] != "weft"}, key=lambda s: (s != "native", s))
cols = ["prompt", "d1", "d4", "d16", "d64", "wall"]
def cell(x):
    return "-" if x is None else ("%.1f" % x if x >= 10 else "%.2f" % x)
print("Figures (tokens/s; wall: seconds of the whole 128-token greedy process; tg64: llama-bench decode):")
print("| round | file | program | prompt 128 | tg64 | decode 1 | decode 4 | decode 16 | decode 64 | wall s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r, t in order:
    for who in ["weft"] + labels:
        g = lambda m: vals.get((r, t, who, m))
        name = who if who == "weft" else "llama.cpp " + who
        print("| %s | %s | %s | %s |" % (r, t, name, " | ".join(cell(g(m)) for m in ["prompt", "tg64", "d1", "d4", "d16", "d64", "wall"])))
print()
print("Ratios weft / llama.cpp (> 1: weft faster; wall: llama.cpp seconds / weft seconds):")
print("| round | file | vs llama.cpp | prompt 128 | decode 1 | decode 4 | decode 16 | decode 64 | wall 128 |")
print("|---|---|---|---|---|---|---|---|---|")
for r, t in order:
    for lab in labels:
        out = []
        for m in cols:
            w, l = vals.get((r, t, "weft", m)), vals.get((r, t, lab, m))
            if m == "d1" and l is None:
                l = vals.get((r, t, lab, "tg64"))
            if w is None or l is None or w == 0 or l == 0:
                out.append("-")
            elif m == "wall":
                out.append("%.2f" % (l / w))
            else:
                out.append("%.2f" % (w / l))
        print("| %s | %s | %s | %s |" % (r, t, lab, " | ".join(out)))
print()
print("decode 1 is against llama-batched-bench at 1 sequence; against llama-bench's tg64:")
for r, t in order:
    for lab in labels:
        w, l = vals.get((r, t, "weft", "d1")), vals.get((r, t, lab, "tg64"))
        if w and l:
            print("  round %s %s %s: %.2f" % (r, t, lab, w / l))
for (r, t, who, m), n in sorted(vals.items()):
    if m == "wall_tokens" and n != 128:
        print("  round %s %s: %s generated %d tokens, not 128 (an end-of-text token?); the wall ratio is not like for like" % (r, t, who, n))
EOF
echo
echo "results: $results; logs: $work/logs"

package main

// TestSoak runs one `weft serve` process (stories260K, a small KV pool, a
// bounded queue) under mixed traffic on every door, then a SIGTERM drain
// while streams run. The server is this test binary started again as
// `weft serve` (see TestMain), so under -race the server runs
// instrumented too.
//
// Without flags the traffic lasts soakShort: the short soak, part of
// `go test ./...`. -soak=DURATION runs it that long, with more clients, and
// logs its figures (BENCHMARKS.md has a run's):
//
//	go test ./cmd/weft -run TestSoak -v -timeout 30m -soak=10m
//
// (-soak comes after the package: go test hands the flags it does not know,
// and all after them, to the test binary).
//
// The traffic: gRPC Generate (long and short prompts, logprobs, stop
// strings, json_schema, cancels at random points, slow and stalled
// readers, a TCP reset mid-stream), gRPC Chat (turns that wait, interrupt,
// ChatCancel, refused turns, abandoned streams; tools under each tool
// choice, with the calls' results sent back as the next turn), Embed,
// Tokenize and GetModelInfo, OpenAI HTTP completions, chat completions
// (unary and SSE, n>1, json_schema, tools, cancels, slow and stalled
// readers, a TCP reset) and embeddings, Anthropic Messages, bad inputs on
// every door, and `weft chat` child processes killed mid-reply. The KV pool holds less than the
// clients' sequences want at once, so admission waits for blocks and
// running sequences are preempted.
//
// What it checks (any violation fails it):
//   - every request ends with exactly one terminal outcome: one Final
//     (gRPC), one finish per choice and [DONE] (SSE), one TurnError or
//     Final per chat turn, or one clean error; none goes without an
//     outcome past the plan's request limit; no 5xx, no INTERNAL or
//     UNKNOWN status; bad inputs get the door's error shape; tool calls
//     name an offered tool and carry JSON arguments; every embedding has
//     the model's width and unit norm, and one text's vector computed
//     among the traffic matches the one computed alone (1e-4, cosine
//     0.9999);
//   - the server stayed up: the process runs and health says SERVING
//     after the traffic, and the server counted every HTTP request
//     (weft_http_requests_total);
//   - once the traffic stops, weft_num_requests_running,
//     weft_num_requests_waiting, weft_kv_cache_usage_perc and the KV
//     blocks held by sequences (weft_kv_cache_blocks{state="used"}) return
//     to 0, so every block is back on the free or prefix-cached lists;
//   - the prefix cache is consistent: used + cached + free blocks make the
//     pool (weft_cache_config_info's num_gpu_blocks), and a prompt sent
//     twice after the traffic comes the second time from the cache, every
//     whole block but the one holding its last token;
//   - go_goroutines returns to its baseline (taken after a warm-up round):
//     no stream, connection or request goroutine is left behind;
//   - in runs of soakRSSMinRun or longer, the server's resident memory
//     (VmRSS, sampled every 2 s) grows less than soakRSSGrowth from minute
//     2 to the end of the traffic;
//   - the server logs no panic and no data race, and the drain ends with
//     exit status 0 within its timeout, every stream in flight at SIGTERM
//     ending with its Final and new requests refused on both doors.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/shareddata"
)

var (
	soakFor     = flag.Duration("soak", 0, "TestSoak: `duration` of the traffic, with the long run's clients and figures (0: the short soak)")
	soakClients = flag.Int("soak-clients", 16, "TestSoak: concurrent clients of a -soak run")
	soakSeed    = flag.Uint64("soak-seed", 0, "TestSoak: the traffic's seed (0: from the clock)")
	soakProfile = flag.String("soak-profiles", "", "TestSoak: serve with --pprof and write the server's heap profile to `DIR`/heap-MMm.pb.gz at each minute of the traffic and heap-end.pb.gz after it (compare two with go tool pprof -base)")
)

// Soak settings. The server's pool holds soakKVMemory of KV (102 blocks of
// 16 tokens for stories260K, whose context is 32 blocks), less than the
// clients' sequences want at once, so admission waits for blocks and
// running sequences are preempted.
const (
	soakKVMemory     = "1MiB"
	soakMaxSeqs      = "12"
	soakMaxWaiting   = "8"
	soakDrainTimeout = 60 * time.Second
	// soakShort is the short soak's traffic.
	soakShort = 20 * time.Second
	// soakRSSGrowth is the most the resident memory may grow from minute 2
	// to the end of the traffic, checked in runs of soakRSSMinRun or more
	// (a shorter run's heap has not reached its working size by then).
	soakRSSGrowth = 0.05
	soakRSSMinRun = 6 * time.Minute
	// soakGoroutineSlack is how many goroutines above the baseline still
	// count as returned to it (the scrape's own connection comes and goes).
	soakGoroutineSlack = 2
)

// soakPlan is one run's shape.
type soakPlan struct {
	traffic time.Duration // how long the clients send requests
	clients int           // concurrent clients
	// requestLimit is how long one request may take before it counts as
	// lost (the longest legitimate one: a stalled reader's pause plus a few
	// hundred tokens under load, under -race in the short soak).
	requestLimit       time.Duration
	stallMin, stallMax time.Duration // a stalled reader pauses this long
	childEvery         time.Duration // a `weft chat` child is killed mid-reply this often
	checkRSS           bool          // the RSS growth limit applies
}

func planFor(long time.Duration, clients int) soakPlan {
	if long == 0 {
		return soakPlan{traffic: soakShort, clients: 10, requestLimit: 60 * time.Second,
			stallMin: time.Second, stallMax: 3 * time.Second, childEvery: 5 * time.Second}
	}
	return soakPlan{traffic: long, clients: clients, requestLimit: 90 * time.Second,
		stallMin: 3 * time.Second, stallMax: 18 * time.Second, childEvery: 20 * time.Second,
		checkRSS: long >= soakRSSMinRun}
}

// stall is a stalled reader's pause.
func (p soakPlan) stall(rng *rand.Rand) time.Duration {
	return p.stallMin + time.Duration(rng.Int64N(int64(p.stallMax-p.stallMin)+1))
}

func TestSoak(t *testing.T) {
	if *soakClients <= 0 {
		t.Fatalf("-soak-clients %d: want at least 1", *soakClients)
	}
	plan := planFor(*soakFor, *soakClients)
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	model := shareddata.Path(t, "models/stories260K.gguf")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The server's log stays when the soak fails.
	dir, err := os.MkdirTemp("", "weft-soak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	t.Logf("soak: %v of traffic, %d clients, seed %d (-soak-seed)", plan.traffic, plan.clients, seed)

	if *soakProfile != "" {
		if err := os.MkdirAll(*soakProfile, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv := startSoakServer(t, bin, model, filepath.Join(dir, "serve.log"), *soakProfile != "")
	defer srv.kill()
	s := &soak{t: t, plan: plan, srv: srv, bin: bin, tally: newTally()}
	s.dial()
	info, err := s.grpc.GetModelInfo(context.Background(), &inferencev1.GetModelInfoRequest{})
	if err != nil {
		t.Fatalf("GetModelInfo: %v", err)
	}
	s.ctxLen = int(info.GetContextLength())
	s.embedDim = int(info.GetEmbeddingDimensions())
	if err := s.embedReference(); err != nil {
		t.Fatalf("the embedding probe's reference: %v", err)
	}
	cold := s.mustScrape().get("go_goroutines")

	// Warm-up: every kind once, so lazily started goroutines and caches
	// exist before the baseline is taken.
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, k := range append(soakKinds, childKind) {
		s.runOne(context.Background(), k, rng)
	}
	s.undial()
	if _, err := s.settle(30*time.Second, func(m metricSet) bool { return m.idle() }); err != nil {
		t.Fatalf("after the warm-up: %v", err)
	}
	baseline := s.stableGoroutines()
	rssBefore, _ := vmRSS(srv.pid)
	warmHTTP := s.httpSent.Load()
	warm := s.tally.total()

	// The traffic.
	s.dial()
	start := time.Now()
	sampler := newSampler(srv, start)
	samplerDone := make(chan struct{})
	go func() { // ends when sampler.stop is closed
		defer close(samplerDone)
		sampler.run(s)
	}()
	trafficCtx, stopTraffic := context.WithDeadline(context.Background(), start.Add(plan.traffic))
	defer stopTraffic()
	var wg sync.WaitGroup
	for c := range plan.clients {
		wg.Go(func() { // ends at the traffic's deadline, after its request
			rng := rand.New(rand.NewPCG(seed, uint64(c)+2))
			for trafficCtx.Err() == nil {
				s.runOne(context.Background(), pickKind(rng), rng)
			}
		})
	}
	// The child-process client, killed mid-reply, every plan.childEvery.
	wg.Go(func() { // ends at the traffic's deadline
		tick := time.NewTicker(plan.childEvery)
		defer tick.Stop()
		for {
			select {
			case <-trafficCtx.Done():
				return
			case <-tick.C:
				s.runOne(context.Background(), childKind, rng)
			}
		}
	})
	progress := time.NewTicker(time.Minute)
	for trafficCtx.Err() == nil {
		select {
		case <-trafficCtx.Done():
		case <-progress.C:
			t.Logf("soak: %v: %d requests, %d violations, RSS %d KiB", time.Since(start).Round(time.Second),
				s.tally.total(), s.tally.violationCount(), sampler.lastRSS())
			s.heapProfile(fmt.Sprintf("heap-%02dm.pb.gz", int(time.Since(start).Round(time.Minute)/time.Minute)))
		}
	}
	progress.Stop()
	clientsDone := make(chan struct{})
	go func() { wg.Wait(); close(clientsDone) }() // ends when the clients do
	select {
	case <-clientsDone:
	case <-time.After(plan.requestLimit + 30*time.Second):
		t.Fatalf("clients still running %v after the traffic's end: a request has no outcome", plan.requestLimit+30*time.Second)
	}
	trafficEnd := time.Now()
	close(sampler.stop)
	<-samplerDone
	s.heapProfile("heap-end.pb.gz")

	// The server stayed up: its process runs and health says SERVING.
	select {
	case <-srv.exited:
		t.Fatalf("weft serve exited during the traffic: %v; log %s", srv.exitErr, srv.logPath)
	default:
	}
	if hr, err := healthpb.NewHealthClient(s.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		s.violate("health", "after the traffic: %v %v", hr.GetStatus(), err)
	}
	s.undial()

	// After the traffic: nothing running, waiting or holding KV blocks,
	// every HTTP request counted by the server, goroutines back.
	httpWant := s.httpSent.Load()
	after, err := s.settle(60*time.Second, func(m metricSet) bool {
		return m.idle() && int64(m.sum("weft_http_requests_total")) == httpWant
	})
	if err != nil {
		s.violate("idle", "%v", err)
	}
	if pool := after.poolBlocks(); pool == 0 || after.ledger() != pool {
		s.violate("kv", "used + cached + free = %.0f blocks, the pool has %.0f", after.ledger(), pool)
	}
	endGoroutines, gerr := s.goroutinesBackTo(baseline+soakGoroutineSlack, 60*time.Second)
	if gerr != nil {
		s.violate("goroutines", "%v", gerr)
	}
	rssAfter, _ := vmRSS(srv.pid)
	memRef, memEnd := sampler.memWindows(plan.traffic)
	growth := 0.0
	if memRef.rss > 0 {
		growth = float64(memEnd.rss-memRef.rss) / float64(memRef.rss)
	}
	if plan.checkRSS && (memRef.rss == 0 || growth >= soakRSSGrowth) {
		s.violate("rss", "VmRSS %d KiB at %v, %d KiB at the end: %+.1f %% (limit %.0f %%)",
			memRef.rss, memRef.at, memEnd.rss, 100*growth, 100*soakRSSGrowth)
	}
	if after.get("weft_num_preemptions_total") == 0 {
		s.violate("pressure", "no preemption in %v: the KV pool did not run short", plan.traffic)
	}

	// The prefix cache serves what it holds, after all that traffic.
	s.dial()
	probe := s.prefixProbe(int(after.cacheConfig("block_size")))
	s.undial()

	// The drain: SIGTERM while streams run.
	drain := s.drain()

	// The figures.
	var b strings.Builder
	fmt.Fprintf(&b, "soak figures: %v of traffic, %d clients, seed %d, model stories260K, --kv-memory %s --max-seqs %s --max-waiting %s, %d CPUs\n",
		trafficEnd.Sub(start).Round(time.Second), plan.clients, seed, soakKVMemory, soakMaxSeqs, soakMaxWaiting, goruntime.NumCPU())
	fmt.Fprintf(&b, "requests (%d in the warm-up, %d in the traffic) by kind and outcome:\n", warm, s.tally.total()-warm)
	s.tally.write(&b)
	fmt.Fprintf(&b, "tokens generated: %d counted by the clients, %.0f by the server (weft_generation_tokens_total); prompt tokens %.0f; %d prompt tokens of gRPC Finals from the prefix cache\n",
		s.tally.tokens(), after.get("weft_generation_tokens_total"), after.get("weft_prompt_tokens_total"), s.tally.cachedTokens())
	fmt.Fprintf(&b, "HTTP requests: %d sent in the traffic (+%d in the warm-up), %.0f counted by the server\n",
		httpWant-warmHTTP, warmHTTP, after.sum("weft_http_requests_total"))
	fmt.Fprintf(&b, "pressure: %.0f preemptions; peaks running %d, waiting %d, KV used %d of %.0f blocks\n",
		after.get("weft_num_preemptions_total"), sampler.peakRunning, sampler.peakWaiting, sampler.peakKVUsed, after.poolBlocks())
	fmt.Fprintf(&b, "after the traffic: running %.0f, waiting %.0f, KV blocks used %.0f, cached %.0f, free %.0f\n",
		after.get("weft_num_requests_running"), after.get("weft_num_requests_waiting"),
		after.blocks("used"), after.blocks("cached"), after.blocks("free"))
	fmt.Fprintf(&b, "prefix probe: a %d-token prompt sent twice, %d tokens of the second from the cache (at least %d wanted)\n",
		probe.prompt, probe.cached, probe.want)
	limit := fmt.Sprintf("limit %.0f %%", 100*soakRSSGrowth)
	if !plan.checkRSS {
		limit = "not checked in runs under " + soakRSSMinRun.String()
	}
	fmt.Fprintf(&b, "VmRSS: %d KiB after the warm-up, %d KiB after the traffic, peak %d KiB; %d KiB at %v (max of the 30 s before), %d KiB at the end (max of the last 30 s): %+.2f %% (%s); %d samples\n",
		rssBefore, rssAfter, sampler.peakRSS(), memRef.rss, memRef.at, memEnd.rss, 100*growth, limit, sampler.count())
	fmt.Fprintf(&b, "Go heap in use: %d KiB at %v, %d KiB at the end (the same windows); by minute of traffic, MiB of VmRSS/RssAnon/Go heap held/in use/kernel scratch, scratch sets:OS threads: %s\n",
		memRef.heap, memRef.at, memEnd.heap, sampler.byMinute())
	fmt.Fprintf(&b, "go_goroutines: %.0f at start, %d after the warm-up (baseline), peak %d in the traffic, %d after it\n",
		cold, baseline, sampler.peakGoroutines, endGoroutines)
	fmt.Fprintf(&b, "drain: %d streams in flight at SIGTERM, %d ended with their Final; new requests while draining: %s; exit status %d after %v (--drain-timeout %v)\n",
		drain.streams, drain.finals, drain.refusals, drain.exitCode, drain.took.Round(10*time.Millisecond), soakDrainTimeout)
	fmt.Fprintf(&b, "server log: %d lines at level=ERROR, %d panics, %d data races (%s)\n", srv.errorLines(), srv.panics(), srv.races(), srv.logPath)
	t.Log(b.String())
	if n := s.tally.violationCount(); n > 0 {
		t.Errorf("%d violations:\n%s", n, strings.Join(s.tally.violationList(), "\n"))
	}
	if srv.panics() > 0 || srv.races() > 0 {
		t.Errorf("the server logged a panic or a data race; see %s", srv.logPath)
	}
}

// soakServer is the `weft serve` process.
type soakServer struct {
	cmd                        *exec.Cmd
	pid                        int
	grpcAddr, httpAddr, metric string
	logPath                    string
	exited                     chan struct{} // closed when the process has been waited for
	exitErr                    error
	exitAt                     time.Time
}

var addrLine = regexp.MustCompile(`msg=("[^"]*"|\S+) addr=(\S+)`)

func startSoakServer(t *testing.T, bin, model, logPath string, pprof bool) *soakServer {
	t.Helper()
	args := []string{"serve", "--model", model, "--chat-template", "chatml", "--backend", "cpu",
		"--kv-memory", soakKVMemory, "--max-seqs", soakMaxSeqs, "--max-waiting", soakMaxWaiting,
		"--drain-timeout", soakDrainTimeout.String(),
		"--addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}
	if pprof {
		args = append(args, "--pprof")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &soakServer{cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, exited: make(chan struct{})}
	addrs := make(chan [2]string, 8)
	copied := make(chan struct{})
	go func() { // ends at the process's exit (stderr's EOF)
		defer close(copied)
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := addrLine.FindStringSubmatch(line); m != nil {
				select {
				case addrs <- [2]string{strings.Trim(m[1], `"`), m[2]}:
				default:
				}
			}
		}
	}()
	go func() { // ends when the process does
		<-copied
		s.exitErr = cmd.Wait()
		s.exitAt = time.Now()
		close(s.exited)
	}()
	deadline := time.After(2 * time.Minute)
	for s.grpcAddr == "" || s.httpAddr == "" || s.metric == "" {
		select {
		case a := <-addrs:
			switch a[0] {
			case "serving":
				s.grpcAddr = a[1]
			case "openai http api":
				s.httpAddr = a[1]
			case "metrics":
				s.metric = a[1]
			}
		case <-s.exited:
			t.Fatalf("weft serve exited before serving: %v; log %s", s.exitErr, logPath)
		case <-deadline:
			s.kill()
			t.Fatalf("weft serve not serving after 2 minutes; log %s", logPath)
		}
	}
	return s
}

func (s *soakServer) kill() {
	select {
	case <-s.exited:
	default:
		s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *soakServer) logLines(match func(string) bool) int {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return -1
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if match(l) {
			n++
		}
	}
	return n
}

func (s *soakServer) errorLines() int {
	return s.logLines(func(l string) bool { return strings.Contains(l, "level=ERROR") })
}

func (s *soakServer) panics() int {
	return s.logLines(func(l string) bool { return strings.Contains(l, "panic") })
}

// races counts the race detector's reports (a server built with -race).
func (s *soakServer) races() int {
	return s.logLines(func(l string) bool { return strings.Contains(l, "WARNING: DATA RACE") })
}

// vmRSS is the process's resident memory in KiB (/proc/PID/status).
func vmRSS(pid int) (int64, error) {
	return procStatus(pid, "VmRSS")
}

// procStatus reads one KiB figure of /proc/PID/status (VmRSS, RssAnon...).
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// metricSet is one scrape of /metrics: series ("name{labels}") to value.
type metricSet map[string]float64

func (m metricSet) get(series string) float64 { return m[series] }

// sum adds every series of the metric name.
func (m metricSet) sum(name string) float64 {
	var v float64
	for k, x := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			v += x
		}
	}
	return v
}

func (m metricSet) blocks(state string) float64 {
	return m[`weft_kv_cache_blocks{state="`+state+`"}`]
}

// ledger is the KV blocks counted in the ledger: used + cached + free.
func (m metricSet) ledger() float64 {
	return m.blocks("used") + m.blocks("cached") + m.blocks("free")
}

// cacheConfig is a label of weft_cache_config_info as a number (0 when
// missing): num_gpu_blocks (the KV pool) or block_size.
func (m metricSet) cacheConfig(label string) float64 {
	re := regexp.MustCompile(label + `="(\d+)"`)
	for k := range m {
		if strings.HasPrefix(k, "weft_cache_config_info{") {
			if g := re.FindStringSubmatch(k); g != nil {
				n, _ := strconv.ParseFloat(g[1], 64)
				return n
			}
		}
	}
	return 0
}

func (m metricSet) poolBlocks() float64 { return m.cacheConfig("num_gpu_blocks") }

// idle: nothing running or waiting, no KV block held by a sequence, and
// the ledger whole (used + cached + free = the pool).
func (m metricSet) idle() bool {
	total := m.ledger()
	return m.get("weft_num_requests_running") == 0 && m.get("weft_num_requests_waiting") == 0 &&
		m.blocks("used") == 0 && m.get("weft_kv_cache_usage_perc") == 0 && total > 0
}

func scrape(addr string) (metricSet, error) {
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	m := metricSet{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("/metrics line %q: %v", l, err)
		}
		m[l[:i]] = v
	}
	return m, sc.Err()
}

// sampler reads VmRSS and the gauges every 2 s during the traffic.
type sampler struct {
	srv   *soakServer
	start time.Time
	stop  chan struct{}

	mu      sync.Mutex
	samples []memSample
	// Peaks seen in the scrapes (written by run only; read after it ends).
	peakRunning, peakWaiting, peakKVUsed, peakGoroutines int
}

// memSample is the server's memory at one moment, in KiB.
type memSample struct {
	at   time.Duration // since the traffic's start
	rss  int64         // VmRSS
	heap int64         // go_memstats_heap_inuse_bytes (0: the scrape failed)
	// The parts of rss (0: not read): anonymous memory (RssAnon: the Go
	// heap and stacks, C allocations) and, of it, what the Go heap holds
	// from the OS (heap_sys - heap_released: in use, or idle and not yet
	// returned).
	anon, held int64
	// scratch is the C kernels' scratch (weft_cpu_scratch_bytes, KiB) in
	// sets buffer sets (weft_cpu_scratch_sets); threads the OS threads
	// (go_threads).
	scratch, sets, threads int64
}

func newSampler(srv *soakServer, start time.Time) *sampler {
	return &sampler{srv: srv, start: start, stop: make(chan struct{})}
}

func (p *sampler) run(s *soak) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		kib, err := vmRSS(p.srv.pid)
		if err != nil {
			s.violate("rss", "reading VmRSS: %v", err)
			continue
		}
		x := memSample{at: time.Since(p.start), rss: kib}
		x.anon, _ = procStatus(p.srv.pid, "RssAnon")
		m, err := scrape(p.srv.metric)
		if err == nil {
			x.heap = int64(m.get("go_memstats_heap_inuse_bytes")) / 1024
			x.held = int64(m.get("go_memstats_heap_sys_bytes")-m.get("go_memstats_heap_released_bytes")) / 1024
			x.scratch = int64(m.get("weft_cpu_scratch_bytes")) / 1024
			x.threads, x.sets = int64(m.get("go_threads")), int64(m.get("weft_cpu_scratch_sets"))
		}
		p.mu.Lock()
		p.samples = append(p.samples, x)
		p.mu.Unlock()
		if err != nil {
			s.violate("metrics", "scrape: %v", err)
			continue
		}
		p.peakRunning = max(p.peakRunning, int(m.get("weft_num_requests_running")))
		p.peakWaiting = max(p.peakWaiting, int(m.get("weft_num_requests_waiting")))
		p.peakKVUsed = max(p.peakKVUsed, int(m.blocks("used")))
		p.peakGoroutines = max(p.peakGoroutines, int(m.get("go_goroutines")))
	}
}

func (p *sampler) lastRSS() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.samples) == 0 {
		return 0
	}
	return p.samples[len(p.samples)-1].rss
}

func (p *sampler) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.samples)
}

func (p *sampler) peakRSS() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var m int64
	for _, x := range p.samples {
		m = max(m, x.rss)
	}
	return m
}

// memWindows is the largest VmRSS and heap in use of the 30 s up to
// minute 2 (a third of the traffic when it is shorter than 6 minutes) and
// of the traffic's last 30 s: each window spans several GC cycles, so its
// peak is the live heap's high-water mark, not one cycle's phase.
func (p *sampler) memWindows(dur time.Duration) (ref, end memSample) {
	ref.at = 2 * time.Minute
	if dur < 6*time.Minute {
		ref.at = dur / 3
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.samples) > 0 {
		end.at = p.samples[len(p.samples)-1].at
	}
	for _, x := range p.samples {
		if x.at > ref.at-30*time.Second && x.at <= ref.at {
			ref.rss, ref.heap = max(ref.rss, x.rss), max(ref.heap, x.heap)
		}
		if x.at > end.at-30*time.Second {
			end.rss, end.heap = max(end.rss, x.rss), max(end.heap, x.heap)
		}
	}
	return ref, end
}

// byMinute is the largest VmRSS, RssAnon, Go heap held from the OS, Go
// heap in use and C kernels' scratch of each minute of the traffic, in
// MiB, its scratch sets and OS threads:
// "rss/anon/held/heap/scratch sets:threads" per minute.
func (p *sampler) byMinute() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var mins []memSample
	for _, x := range p.samples {
		i := int(x.at / time.Minute)
		for len(mins) <= i {
			mins = append(mins, memSample{})
		}
		mins[i].rss, mins[i].heap = max(mins[i].rss, x.rss), max(mins[i].heap, x.heap)
		mins[i].anon, mins[i].held = max(mins[i].anon, x.anon), max(mins[i].held, x.held)
		mins[i].scratch, mins[i].sets, mins[i].threads = max(mins[i].scratch, x.scratch), max(mins[i].sets, x.sets), max(mins[i].threads, x.threads)
	}
	parts := make([]string, len(mins))
	for i, m := range mins {
		parts[i] = fmt.Sprintf("%d/%d/%d/%d/%d %d:%d", m.rss/1024, m.anon/1024, m.held/1024, m.heap/1024, m.scratch/1024, m.sets, m.threads)
	}
	return strings.Join(parts, " ")
}

// soak is the clients' shared state.
type soak struct {
	t      *testing.T
	plan   soakPlan
	srv    *soakServer
	bin    string
	tally  *tally
	ctxLen int
	// embedDim is the model's embedding width; embedRef is embedProbe's
	// vector computed alone before the traffic.
	embedDim int
	embedRef []float32

	conn     *grpc.ClientConn
	grpc     inferencev1.InferenceServiceClient
	http     *http.Client
	httpSent atomic.Int64 // HTTP requests that reached the server's handler
}

func (s *soak) dial() {
	conn, err := grpc.NewClient(s.srv.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.t.Fatal(err)
	}
	s.conn, s.grpc = conn, inferencev1.NewInferenceServiceClient(conn)
	s.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
}

// undial closes the clients' connections, so the server's per-connection
// goroutines end.
func (s *soak) undial() {
	s.conn.Close()
	s.http.Transport.(*http.Transport).CloseIdleConnections()
}

func (s *soak) mustScrape() metricSet {
	m, err := scrape(s.srv.metric)
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

func (s *soak) violate(kind, format string, args ...any) {
	s.tally.violate(kind + ": " + fmt.Sprintf(format, args...))
}

// settle scrapes every 250 ms until ok holds, for at most limit.
func (s *soak) settle(limit time.Duration, ok func(metricSet) bool) (metricSet, error) {
	deadline := time.Now().Add(limit)
	for {
		m, err := scrape(s.srv.metric)
		if err == nil && ok(m) {
			return m, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return m, err
			}
			return m, fmt.Errorf("not settled after %v: running %.0f, waiting %.0f, KV used %.0f (usage %.3f), cached %.0f, free %.0f; HTTP requests counted %.0f, sent %d",
				limit, m.get("weft_num_requests_running"), m.get("weft_num_requests_waiting"), m.blocks("used"),
				m.get("weft_kv_cache_usage_perc"), m.blocks("cached"), m.blocks("free"),
				m.sum("weft_http_requests_total"), s.httpSent.Load())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stableGoroutines is go_goroutines once two scrapes a second apart agree.
func (s *soak) stableGoroutines() int {
	prev := -1
	for range 30 {
		n := int(s.mustScrape().get("go_goroutines"))
		if n == prev {
			return n
		}
		prev = n
		time.Sleep(time.Second)
	}
	return prev
}

func (s *soak) goroutinesBackTo(limit int, wait time.Duration) (int, error) {
	deadline := time.Now().Add(wait)
	for {
		n := int(s.mustScrape().get("go_goroutines"))
		if n <= limit {
			return n, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("go_goroutines %d after the traffic, %v later; baseline + slack %d", n, wait, limit)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// tally counts requests by kind and outcome, and the violations.
type tally struct {
	mu         sync.Mutex
	kinds      map[string]map[string]int // kind -> outcome -> requests
	toks       int64
	cached     int64 // prompt tokens from the prefix cache, as gRPC Finals said
	violations []string
	nviol      int
}

func newTally() *tally { return &tally{kinds: map[string]map[string]int{}} }

func (t *tally) record(kind, outcome string, tokens int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kinds[kind] == nil {
		t.kinds[kind] = map[string]int{}
	}
	t.kinds[kind][outcome]++
	t.toks += int64(tokens)
}

func (t *tally) violate(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nviol++
	if len(t.violations) < 50 {
		t.violations = append(t.violations, msg)
	}
}

func (t *tally) violationCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nviol
}

func (t *tally) violationList() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.violations...)
}

// total is the requests recorded (chat turns apart).
func (t *tally) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, o := range t.kinds {
		if strings.HasSuffix(k, "_turn") {
			continue
		}
		for _, c := range o {
			n += c
		}
	}
	return n
}

func (t *tally) addCached(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cached += n
}

func (t *tally) cachedTokens() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cached
}

func (t *tally) tokens() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.toks
}

// doorOf is the door a request kind goes through.
func doorOf(kind string) string {
	switch {
	case kind == "child_killed":
		return "gRPC (weft chat)"
	case strings.HasPrefix(kind, "grpc_"):
		return "gRPC"
	case kind == "http_messages" || strings.HasPrefix(kind, "http_anthropic"):
		return "Anthropic HTTP"
	case strings.HasPrefix(kind, "http_"):
		return "OpenAI HTTP"
	}
	return "other"
}

// isError says whether an outcome is a refusal or an error (not a Final,
// a finish or a client's own cancel), for the errors-by-code line.
func isError(outcome string) bool {
	for _, p := range []string{"status ", "http ", "turn_error ", "sse error", "final error"} {
		if strings.HasPrefix(outcome, p) {
			return true
		}
	}
	return false
}

// write prints one line per kind (its requests and their outcomes), the
// requests per door, the chat turns and the errors by code. A chat
// turn (kind grpc_chat_turn) is part of its grpc_chat* request and is
// counted apart.
func (t *tally) write(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	kinds := make([]string, 0, len(t.kinds))
	for k := range t.kinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	doors, errs, all := map[string]int{}, map[string]int{}, map[string]int{}
	total := 0
	for _, k := range kinds {
		n := 0
		for o, c := range t.kinds[k] {
			n += c
			if isError(o) {
				errs[o] += c
			}
			if !strings.HasSuffix(k, "_turn") {
				all[o] += c
			}
		}
		if !strings.HasSuffix(k, "_turn") {
			total += n
			doors[doorOf(k)] += n
		}
		fmt.Fprintf(w, "  %-24s %7d  %s\n", k, n, outcomeList(t.kinds[k]))
	}
	fmt.Fprintf(w, "  %-24s %7d  (chat turns apart)\n", "all requests", total)
	fmt.Fprintf(w, "requests by door: %s\n", outcomeList(doors))
	fmt.Fprintf(w, "errors and refusals by code: %s\n", outcomeList(errs))
	fmt.Fprintf(w, "violations: %d\n", t.nviol)
}

func outcomeList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// drainResult is what the SIGTERM drain showed.
type drainResult struct {
	streams, finals int
	refusals        string
	exitCode        int
	took            time.Duration
}

// sigterm sends SIGTERM to the server.
func (s *soakServer) sigterm() error { return s.cmd.Process.Signal(syscall.SIGTERM) }

// probeResult is what the prefix probe saw.
type probeResult struct {
	prompt, cached, want int
}

// prefixProbe sends one long prompt twice, greedy, a few tokens each, with
// nothing else running: the second must take every whole block of the
// prompt but the one holding its last token from the prefix cache (the
// first has just computed and registered them).
func (s *soak) prefixProbe(blockSize int) probeResult {
	var res probeResult
	if blockSize <= 0 {
		s.violate("prefix", "no block_size in weft_cache_config_info")
		return res
	}
	text := strings.Repeat("The little dog ran to the park and found a big red ball. ", 8)
	for i := range 2 {
		st, err := s.grpc.Generate(context.Background(), &inferencev1.GenerateRequest{
			Prompt:   &inferencev1.GenerateRequest_Text{Text: text},
			Sampling: &inferencev1.SamplingParams{Temperature: 0},
			Stopping: &inferencev1.StoppingCriteria{MaxTokens: 4, IgnoreEos: true},
		})
		var final *inferencev1.Final
		for err == nil {
			var m *inferencev1.GenerateResponse
			if m, err = st.Recv(); err == nil && m.GetFinal() != nil {
				final = m.GetFinal()
			}
		}
		if !errors.Is(err, io.EOF) || final == nil {
			s.violate("prefix", "probe %d: %v, Final %v", i, err, final)
			return res
		}
		res.prompt, res.cached = int(final.GetUsage().GetPromptTokens()), int(final.GetUsage().GetCachedTokens())
	}
	res.want = (res.prompt - 1) / blockSize * blockSize
	if res.cached < res.want {
		s.violate("prefix", "a %d-token prompt sent again took %d tokens from the prefix cache, want at least %d", res.prompt, res.cached, res.want)
	}
	return res
}

// heapProfile writes the server's heap profile (after a GC) to name in
// -soak-profiles' directory; without the flag it does nothing. A failed
// fetch is logged, not a violation: profiles are a diagnosis, not a check.
func (s *soak) heapProfile(name string) {
	if *soakProfile == "" {
		return
	}
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + s.srv.metric + "/debug/pprof/heap?gc=1")
	if err != nil {
		s.t.Logf("soak: heap profile %s: %v", name, err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %s", resp.Status)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(*soakProfile, name), b, 0o644)
	}
	if err != nil {
		s.t.Logf("soak: heap profile %s: %v", name, err)
	}
}

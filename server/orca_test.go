package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	v3orcaservicegrpc "github.com/cncf/xds/go/xds/service/orca/v3"
	v3orcaservicepb "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/scheduler"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

func TestSaturation(t *testing.T) {
	tests := []struct {
		name    string
		st      scheduler.Stats
		maxSeqs int
		want    float64
	}{
		{"idle", scheduler.Stats{KVBlocksTotal: 100}, 4, 0},
		{"cached blocks are not load", scheduler.Stats{KVBlocksTotal: 100, KVBlocksCached: 90}, 4, 0},
		{"half the seqs", scheduler.Stats{Running: 2, KVBlocksTotal: 100, KVBlocksUsed: 10}, 4, 0.5},
		{"kv dominates", scheduler.Stats{Running: 1, KVBlocksTotal: 100, KVBlocksUsed: 80}, 4, 0.8},
		{"full batch", scheduler.Stats{Running: 4, KVBlocksTotal: 100, KVBlocksUsed: 10}, 4, 1},
		{"full batch and a queue", scheduler.Stats{Running: 4, Waiting: 9, KVBlocksTotal: 100}, 4, 1},
		// u = 0.5, w/(w+max) = 4/8: 0.5 + 0.5*0.5
		{"queue behind a half-full batch", scheduler.Stats{Running: 2, Waiting: 4, KVBlocksTotal: 100}, 4, 0.75},
		// KV full with one sequence: u = 1 whatever waits
		{"kv full", scheduler.Stats{Running: 1, Waiting: 3, KVBlocksTotal: 10, KVBlocksUsed: 10}, 4, 1},
		// only a queue (admission paused): 0 + 1*2/(2+2)
		{"queue only", scheduler.Stats{Waiting: 2, KVBlocksTotal: 10}, 2, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := saturation(tt.st, tt.maxSeqs); got != tt.want {
				t.Errorf("saturation(%+v, %d) = %v, want %v", tt.st, tt.maxSeqs, got, tt.want)
			}
		})
	}
}

// scrape reads the text exposition of /metrics into "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// loadView is what the protocol gauges and the ORCA report say.
type loadView struct {
	Running, Waiting, KVUsage float64 // /metrics
	CacheConfig               float64 // weft_cache_config_info{...}
	// weft_kv_cache_blocks{state}: used, cached and free.
	KVUsed, KVCached, KVFree float64
	AppUtil                  float64 // ORCA application_utilization
	Named                    map[string]float64
}

// TestLoadReportsTrackScheduler holds the fake model between steps so the
// scheduler's Stats stand still, and checks the Endpoint Picker gauges on
// /metrics and the out-of-band ORCA report against them: with two
// sequences of a four-sequence batch, with a full batch and a queue, and
// idle again after every request ended.
func TestLoadReportsTrackScheduler(t *testing.T) {
	const maxSeqs = 4
	atGate := make(chan struct{}, 1) // a step reached the gate (coalesced)
	h := newHarness(t, harnessOpts{
		gated:  true,
		sched:  func(c *scheduler.Config) { c.MaxSeqs = maxSeqs; c.NumBlocks = 512 },
		server: func(c *Config) { c.Info.KV = KVCache{BlockSize: 16, NumBlocks: 512} },
		model: func(m *schedtest.Model) {
			m.AtGate = func() {
				select {
				case atGate <- struct{}{}:
				default:
				}
			}
		},
	})
	web := httptest.NewServer(h.srv.MetricsHandler())
	defer web.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// fresh opens an out-of-band stream and returns its first report,
	// which the server builds when the stream starts.
	fresh := func() *v3orcapb.OrcaLoadReport {
		t.Helper()
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		oob, err := v3orcaservicegrpc.NewOpenRcaServiceClient(h.conn).StreamCoreMetrics(sctx,
			&v3orcaservicepb.OrcaLoadReportRequest{ReportInterval: durationpb.New(time.Millisecond)}) // raised to MinORCAInterval
		if err != nil {
			t.Fatal(err)
		}
		r, err := oob.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	reqCtx, reqCancel := context.WithCancel(ctx)
	defer reqCancel()
	started := 0
	start := func(n int) {
		t.Helper()
		for range n {
			req := textPrompt("load", 8000) // the pool holds 8192 tokens: the context honoured
			req.RequestId = fmt.Sprint("r", started)
			started++
			s, err := h.client.Generate(reqCtx, req)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for {
					if _, err := s.Recv(); err != nil {
						return
					}
				}
			}()
		}
	}
	// settle runs steps one at a time until the published Stats show
	// running and waiting. Each step is let through alone and waited for
	// until its Stats are published (the next step reaching the gate says
	// so); the model then blocks at that gate, so nothing moves while the
	// caller reads the reports.
	settle := func(running, waiting int) scheduler.Stats {
		t.Helper()
		for range 10000 {
			before := h.sched.Stats().Steps
			h.model.Gate <- struct{}{}
			for h.sched.Stats().Steps == before {
				<-atGate
			}
			if st := h.sched.Stats(); st.Running == running && st.Waiting == waiting {
				return st
			}
		}
		t.Fatalf("stats never reached running %d, waiting %d: %+v", running, waiting, h.sched.Stats())
		return scheduler.Stats{}
	}
	view := func() loadView {
		t.Helper()
		m := scrape(t, web.URL)
		r := fresh()
		return loadView{
			Running: m["weft_num_requests_running"], Waiting: m["weft_num_requests_waiting"],
			KVUsage: m["weft_kv_cache_usage_perc"], CacheConfig: m[`weft_cache_config_info{block_size="16",num_gpu_blocks="512"}`],
			KVUsed: m[`weft_kv_cache_blocks{state="used"}`], KVCached: m[`weft_kv_cache_blocks{state="cached"}`],
			KVFree:  m[`weft_kv_cache_blocks{state="free"}`],
			AppUtil: r.GetApplicationUtilization(), Named: r.GetNamedMetrics(),
		}
	}
	want := func(st scheduler.Stats) loadView {
		kv := float64(st.KVBlocksUsed) / float64(st.KVBlocksTotal)
		return loadView{
			Running: float64(st.Running), Waiting: float64(st.Waiting), KVUsage: kv, CacheConfig: 1,
			KVUsed: float64(st.KVBlocksUsed), KVCached: float64(st.KVBlocksCached), KVFree: float64(st.KVBlocksFree),
			AppUtil: saturation(st, maxSeqs),
			Named: map[string]float64{
				"kv_cache_usage": kv, "num_requests_running": float64(st.Running), "num_requests_waiting": float64(st.Waiting),
			},
		}
	}

	start(2)
	st := settle(2, 0)
	got := view()
	if diff := cmp.Diff(want(st), got); diff != "" {
		t.Errorf("two running (-want +got):\n%s", diff)
	}
	if got.AppUtil != 0.5 {
		t.Errorf("two of four running: application_utilization %v, want 0.5", got.AppUtil)
	}
	if st.KVBlocksUsed == 0 {
		t.Errorf("two running hold no KV blocks: %+v", st)
	}

	start(3)
	st = settle(4, 1)
	got = view()
	if diff := cmp.Diff(want(st), got); diff != "" {
		t.Errorf("full batch and a queue (-want +got):\n%s", diff)
	}
	if got.AppUtil != 1 {
		t.Errorf("full batch: application_utilization %v, want 1", got.AppUtil)
	}

	// Idle: every request ends; Drain's drained signal comes after the
	// scheduler published its last Stats.
	h.sched.Drain()
	reqCancel()
	for done := false; !done; {
		select {
		case h.model.Gate <- struct{}{}:
		case <-h.sched.Drained():
			done = true
		}
	}
	st = h.sched.Stats()
	if st.Running != 0 || st.Waiting != 0 || st.KVBlocksUsed != 0 {
		t.Fatalf("idle stats %+v", st)
	}
	got = view()
	if diff := cmp.Diff(want(st), got); diff != "" {
		t.Errorf("idle (-want +got):\n%s", diff)
	}
	if got.AppUtil != 0 {
		t.Errorf("idle: application_utilization %v, want 0", got.AppUtil)
	}
}

// trailerReport decodes the per-call ORCA report from a trailer.
func trailerReport(t *testing.T, md metadata.MD) *v3orcapb.OrcaLoadReport {
	t.Helper()
	v := md.Get("endpoint-load-metrics-bin")
	if len(v) != 1 {
		t.Fatalf("trailer %v: %d endpoint-load-metrics-bin values, want 1", md, len(v))
	}
	var r v3orcapb.OrcaLoadReport
	if err := proto.Unmarshal([]byte(v[0]), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestPerCallLoadReport: Generate, Chat and a unary RPC end with an ORCA
// report in their trailers carrying the named metrics.
func TestPerCallLoadReport(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	keys := func(r *v3orcapb.OrcaLoadReport) []string {
		var ks []string
		for _, k := range []string{"kv_cache_usage", "num_requests_running", "num_requests_waiting"} {
			if _, ok := r.GetNamedMetrics()[k]; ok {
				ks = append(ks, k)
			}
		}
		return ks
	}
	wantKeys := []string{"kv_cache_usage", "num_requests_running", "num_requests_waiting"}

	gen, err := h.client.Generate(ctx, textPrompt("hello", 8))
	if err != nil {
		t.Fatal(err)
	}
	if r := collect(gen); r.err != nil || r.final == nil {
		t.Fatalf("generate: %+v", r)
	}
	if diff := cmp.Diff(wantKeys, keys(trailerReport(t, gen.Trailer()))); diff != "" {
		t.Errorf("Generate trailer named metrics (-want +got):\n%s", diff)
	}

	chat, err := h.client.Chat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := chat.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: &inferencev1.ChatTurn{
		Messages: []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: "hi"}},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: 4},
	}}}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := chat.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetFinal() == nil {
			if m.GetLoadReport() != nil {
				t.Errorf("a chunk carries a load report: %v", m)
			}
			continue
		}
		// The turn's own report (trailers come once per stream).
		lr := m.GetLoadReport()
		if lr == nil {
			t.Fatal("the turn's Final carries no load report")
		}
		var got []string
		for k := range lr.GetNamedMetrics() {
			got = append(got, k)
		}
		slices.Sort(got)
		if diff := cmp.Diff(wantKeys, got); diff != "" {
			t.Errorf("Chat turn report named metrics (-want +got):\n%s", diff)
		}
		if u := lr.GetApplicationUtilization(); u < 0 || u > 1 {
			t.Errorf("Chat turn report application_utilization %v, want in [0, 1]", u)
		}
		break
	}
	chat.CloseSend()
	if _, err := chat.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("chat end: %v", err)
	}
	if diff := cmp.Diff(wantKeys, keys(trailerReport(t, chat.Trailer()))); diff != "" {
		t.Errorf("Chat trailer named metrics (-want +got):\n%s", diff)
	}

	var md metadata.MD
	if _, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{}, grpc.Trailer(&md)); err != nil {
		t.Fatal(err)
	}
	r := trailerReport(t, md)
	if diff := cmp.Diff(wantKeys, keys(r)); diff != "" {
		t.Errorf("GetModelInfo trailer named metrics (-want +got):\n%s", diff)
	}
	if r.GetApplicationUtilization() != 0 {
		t.Errorf("idle replica's trailer: application_utilization %v, want 0", r.GetApplicationUtilization())
	}
}

package server

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goruntime "runtime"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	v3orcaservicegrpc "github.com/cncf/xds/go/xds/service/orca/v3"
	v3orcaservicepb "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/scheduler"
)

// ORCA load reports (gRFC A51): every RPC's trailer carries one
// (endpoint-load-metrics-bin, via orca.CallMetricsServerOption), and
// OpenRcaService/StreamCoreMetrics streams them out of band. Both read the
// scheduler's published Stats when a report is due, so the step loop does
// no extra work.
//
// application_utilization is the replica's saturation in [0, 1]:
//
//	u = max(kv_cache_usage, running/max_seqs)
//	w = waiting
//	application_utilization = u + (1-u) * w/(w+max_seqs)
//
// A waiting queue as long as the batch pushes a half-busy replica to 0.75;
// an idle one reports 0. rps_fractional counts the Generate and Chat RPCs
// finished per second (weighted_round_robin needs it).

// MinORCAInterval is the shortest out-of-band reporting interval the server
// grants; a client asking for less gets this.
const MinORCAInterval = 100 * time.Millisecond

// saturation is application_utilization (see above).
func saturation(s scheduler.Stats, maxSeqs int) float64 {
	if maxSeqs <= 0 {
		maxSeqs = 1
	}
	u := max(kvUsage(s), float64(s.Running)/float64(maxSeqs))
	u = min(max(u, 0), 1)
	if w := float64(s.Waiting); w > 0 {
		u += (1 - u) * w / (w + float64(maxSeqs))
	}
	return u
}

// loadReporter builds ORCA reports from the scheduler's Stats and the
// process's CPU and memory use. It implements orca.ServerMetricsProvider.
type loadReporter struct {
	stats   func() scheduler.Stats
	maxSeqs int

	calls atomic.Uint64 // Generate and Chat RPCs finished since start

	mu        sync.Mutex
	lastCPU   time.Duration // process CPU time at lastAt
	lastCalls uint64        // calls at lastAt
	lastAt    time.Time
	cpu       float64 // utilization over the last sample window
	qps       float64 // finished Generate and Chat RPCs per second over it
}

var _ orca.ServerMetricsProvider = (*loadReporter)(nil)

func newLoadReporter(stats func() scheduler.Stats, maxSeqs int) *loadReporter {
	r := &loadReporter{stats: stats, maxSeqs: maxSeqs, lastAt: time.Now(), cpu: -1}
	r.lastCPU, _ = processCPU()
	return r
}

// minSampleWindow is the shortest wall time CPU utilization and QPS are
// measured over; reports closer together reuse the last figures.
const minSampleWindow = 100 * time.Millisecond

// rates returns the process's CPU time over wall time since the last
// sample, divided by GOMAXPROCS (-1 when it cannot be measured), and the
// Generate and Chat RPCs finished per second over the same window.
func (r *loadReporter) rates(now time.Time) (cpuUtil, qps float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if wall := now.Sub(r.lastAt); wall >= minSampleWindow {
		calls := r.calls.Load()
		r.qps = float64(calls-r.lastCalls) / wall.Seconds()
		r.cpu = -1
		if cpu, ok := processCPU(); ok {
			r.cpu = float64(cpu-r.lastCPU) / float64(wall) / float64(goruntime.GOMAXPROCS(0))
			r.cpu = min(max(r.cpu, 0), 1)
			r.lastCPU = cpu
		}
		r.lastCalls, r.lastAt = calls, now
	}
	return r.cpu, r.qps
}

// ServerMetrics returns the current report. Unmeasurable utilizations are
// -1 (left out of the report).
func (r *loadReporter) ServerMetrics() *orca.ServerMetrics {
	st := r.stats()
	cpu, qps := r.rates(time.Now())
	return &orca.ServerMetrics{
		CPUUtilization: cpu,
		MemUtilization: memUtilization(),
		AppUtilization: saturation(st, r.maxSeqs),
		QPS:            qps,
		EPS:            -1,
		NamedMetrics: map[string]float64{
			"kv_cache_usage":       kvUsage(st),
			"num_requests_running": float64(st.Running),
			"num_requests_waiting": float64(st.Waiting),
		},
	}
}

// report is ServerMetrics as the ORCA proto.
func (r *loadReporter) report() *v3orcapb.OrcaLoadReport {
	sm := r.ServerMetrics()
	rep := &v3orcapb.OrcaLoadReport{
		ApplicationUtilization: sm.AppUtilization,
		RpsFractional:          sm.QPS,
		NamedMetrics:           sm.NamedMetrics,
	}
	if sm.CPUUtilization >= 0 {
		rep.CpuUtilization = sm.CPUUtilization
	}
	if sm.MemUtilization >= 0 {
		rep.MemUtilization = sm.MemUtilization
	}
	return rep
}

// turnReport is ServerMetrics as the API's LoadReport, for a Chat turn's
// Final (trailers come once per stream).
func (r *loadReporter) turnReport() *inferencev1.LoadReport {
	rep := r.report()
	return &inferencev1.LoadReport{
		ApplicationUtilization: rep.GetApplicationUtilization(),
		CpuUtilization:         rep.GetCpuUtilization(),
		MemUtilization:         rep.GetMemUtilization(),
		RpsFractional:          rep.GetRpsFractional(),
		NamedMetrics:           rep.GetNamedMetrics(),
	}
}

// orcaService implements OpenRcaService with a minimum interval of
// MinORCAInterval (grpc-go's orca.Service will not go below 30s).
type orcaService struct {
	v3orcaservicegrpc.UnimplementedOpenRcaServiceServer
	r *loadReporter
}

// StreamCoreMetrics sends a report at once and then every requested
// interval (at least MinORCAInterval) until the client goes away.
func (o orcaService) StreamCoreMetrics(req *v3orcaservicepb.OrcaLoadReportRequest, stream v3orcaservicegrpc.OpenRcaService_StreamCoreMetricsServer) error {
	every := MinORCAInterval
	if d := req.GetReportInterval(); d != nil && d.AsDuration() > every {
		every = d.AsDuration()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := stream.Send(o.r.report()); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			// The client went away: CANCELED or DEADLINE_EXCEEDED, not UNKNOWN.
			return status.FromContextError(stream.Context().Err()).Err()
		case <-t.C:
		}
	}
}

// orcaServerOptions put a report from r into every RPC's trailer: grpc-go's
// interceptor writes one only for calls whose handler asked for the call's
// recorder, so the next interceptor asks for every call. It also counts
// the finished Generate and Chat RPCs for the reports' rps_fractional (a
// weighted_round_robin client weighs a replica by qps/utilization and
// ignores reports without it).
func orcaServerOptions(r *loadReporter) []grpc.ServerOption {
	count := func(method string) {
		if method == "/"+ServiceName+"/Generate" || method == "/"+ServiceName+"/Chat" {
			r.calls.Add(1)
		}
	}
	return []grpc.ServerOption{
		orca.CallMetricsServerOption(r),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			orca.CallMetricsRecorderFromContext(ctx)
			defer count(info.FullMethod)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			orca.CallMetricsRecorderFromContext(ss.Context())
			defer count(info.FullMethod)
			return h(srv, ss)
		}),
	}
}

// registerORCA registers the out-of-band service on g.
func registerORCA(g *grpc.Server, r *loadReporter) {
	v3orcaservicegrpc.RegisterOpenRcaServiceServer(g, orcaService{r: r})
}

// memUtilization is the resident set size over the machine's total memory
// (from /proc; -1 where it is not there).
func memUtilization() float64 {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := bytes.Fields(statm)
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return -1
	}
	total := memTotal()
	if total == 0 {
		return -1
	}
	return min(float64(pages*uint64(os.Getpagesize()))/float64(total), 1)
}

var memTotalOnce = sync.OnceValue(func() uint64 {
	fh, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemTotal:" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
})

func memTotal() uint64 { return memTotalOnce() }

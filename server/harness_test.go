package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/scheduler"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

// harness runs a scheduler on the fake model behind a Server on bufconn.
type harness struct {
	t      *testing.T
	sched  *scheduler.Scheduler
	model  *schedtest.Model
	srv    *Server
	lis    *bufconn.Listener
	conn   *grpc.ClientConn
	client inferencev1.InferenceServiceClient

	gateOnce sync.Once
	mu       sync.Mutex
	finals   map[string]chan *scheduler.Final
}

type harnessOpts struct {
	sched     func(*scheduler.Config)
	door      func(*frontdoor.Config) // its Limits are the scheduler's
	model     func(*schedtest.Model)  // hooks set before the first step
	server    func(*Config)
	gated     bool
	dialOpts  []grpc.DialOption
	listener  net.Listener // a real listener instead of bufconn
	noServing bool
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	scfg := scheduler.Config{
		BlockSize:  16,
		NumBlocks:  4096,
		MaxSeqs:    64,
		ContextLen: 40000,
		NewDecoder: func() scheduler.TextDecoder { return schedtest.Bytes{} },
		IsEOG:      func(id int32) bool { return id == fakeEOS },
		VocabSize:  fakeVocab,
	}
	if o.sched != nil {
		o.sched(&scfg)
	}
	h := &harness{t: t, finals: map[string]chan *scheduler.Final{}}
	h.model = schedtest.NewModel(scfg.BlockSize, scfg.NumBlocks)
	h.model.Next = nextToken
	if o.gated {
		h.model.Gate = make(chan struct{})
	}
	if o.model != nil {
		o.model(h.model)
	}
	sched, err := scheduler.New(scfg, h.model)
	if err != nil {
		t.Fatal(err)
	}
	h.sched = sched
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		sched.Run(ctx)
	}()

	reg := prometheus.NewRegistry()
	dcfg := frontdoor.Config{
		Tokenizer: fakeTokenizer{},
		Chat:      fakeChat{},
		Limits:    sched.Limits(),
		Logger:    slog.New(slog.DiscardHandler),
		Registry:  reg,
	}
	if o.door != nil {
		o.door(&dcfg)
	}
	door, err := frontdoor.New(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Scheduler: sched,
		Door:      door,
		Tokenizer: fakeTokenizer{},
		Info:      ModelInfo{Name: "fake", Architecture: "fake"},
		Registry:  reg,
		onFinal:   h.onFinal,
	}
	if o.server != nil {
		o.server(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	var lis net.Listener = o.listener
	dial := "passthrough:///bufnet"
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, o.dialOpts...)
	if lis == nil {
		h.lis = bufconn.Listen(1 << 20)
		lis = h.lis
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return h.lis.DialContext(ctx)
		}))
	} else {
		dial = lis.Addr().String()
	}
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		srv.Serve(lis)
	}()
	if !o.noServing {
		srv.SetServing(true)
	}
	conn, err := grpc.NewClient(dial, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h.conn = conn
	h.client = inferencev1.NewInferenceServiceClient(conn)
	t.Cleanup(func() {
		conn.Close()
		if h.model.Gate != nil {
			h.openGate()
		}
		srv.GRPC().Stop()
		<-serveDone
		cancel()
		<-runDone
		if err := h.model.Err(); err != nil {
			t.Errorf("fake model: %v", err)
		}
	})
	return h
}

// openGate lets the fake model run freely from now on.
func (h *harness) openGate() { h.gateOnce.Do(func() { close(h.model.Gate) }) }

func (h *harness) onFinal(id string, f *scheduler.Final) {
	select {
	case h.finalChan(id) <- f:
	default: // only the first Final of an id is kept
	}
}

// finalChan is where the scheduler Final of request id arrives (once).
func (h *harness) finalChan(id string) chan *scheduler.Final {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.finals[id]
	if !ok {
		c = make(chan *scheduler.Final, 1)
		h.finals[id] = c
	}
	return c
}

// genResult is a whole Generate stream as the client saw it.
type genResult struct {
	tokens   []int32
	text     string
	messages int // chunk messages
	final    *inferencev1.Final
	err      error
}

// collect reads a Generate stream to its end.
func collect(s grpc.ServerStreamingClient[inferencev1.GenerateResponse]) genResult {
	var r genResult
	for {
		m, err := s.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.err = err
			}
			return r
		}
		if c := m.GetChunk(); c != nil {
			r.messages++
			r.tokens = append(r.tokens, c.GetTokenIds()...)
			r.text += c.GetText()
		}
		if f := m.GetFinal(); f != nil {
			r.final = f
		}
	}
}

// generate runs one Generate to its end.
func (h *harness) generate(ctx context.Context, req *inferencev1.GenerateRequest) genResult {
	s, err := h.client.Generate(ctx, req)
	if err != nil {
		return genResult{err: err}
	}
	return collect(s)
}

// errorInfo returns the code and the one ErrorInfo reason of err ("" when
// there is none; it fails the test if there are several).
func errorInfo(t *testing.T, err error) (codes.Code, string) {
	t.Helper()
	st := status.Convert(err)
	var reasons []string
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			if ei.GetDomain() != ErrorDomain {
				t.Errorf("ErrorInfo domain %q, want %q", ei.GetDomain(), ErrorDomain)
			}
			reasons = append(reasons, ei.GetReason())
		}
	}
	if len(reasons) > 1 {
		t.Errorf("%d ErrorInfo details, want at most one: %v", len(reasons), reasons)
	}
	if len(reasons) == 0 {
		return st.Code(), ""
	}
	return st.Code(), reasons[0]
}

func textPrompt(s string, maxTokens int32) *inferencev1.GenerateRequest {
	return &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_Text{Text: s},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: maxTokens},
	}
}

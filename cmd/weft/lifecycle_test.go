package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/server"
)

// refused is what a client learns from a refused call.
type refused struct {
	Code   codes.Code
	Reason string
	Retry  bool
}

func refusalOf(err error) refused {
	st := status.Convert(err)
	r := refused{Code: st.Code()}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			r.Reason = d.Reason
		case *errdetails.RetryInfo:
			r.Retry = true
		}
	}
	return r
}

// gatedBackend holds every forward pass until gate is closed.
type gatedBackend struct {
	batch.Backend
	gate chan struct{}
}

func (g *gatedBackend) Forward(ctx context.Context, seqs []batch.SeqStep, logits [][]float32) error {
	<-g.gate
	return g.Backend.Forward(ctx, seqs, logits)
}

func dialTCP(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// During a drain, on real TCP: health turns NOT_SERVING (seen by a Watch)
// and a new connection can still read it; new calls get UNAVAILABLE /
// DRAINING with RetryInfo; the in-flight stream finishes normally and
// serve returns nil.
func TestServeDrainKeepsListenerAndHealth(t *testing.T) {
	m, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cb, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f16", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	b := &gatedBackend{Backend: cb, gate: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	c, err := parseServeFlags([]string{"--backend", "cpu", "--drain-timeout", "1h"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startWhenReady(t, func(ready chan<- struct{}) error {
		return serve(ctx, c, serveDeps{Model: m, Backend: b, Log: slog.New(slog.DiscardHandler)}, lis, nil, ready)
	})
	conn := dialTCP(t, addr, nil)
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	watch, err := healthpb.NewHealthClient(conn).Watch(wctx, &healthpb.HealthCheckRequest{Service: server.ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the drain: %v, %v", r.GetStatus(), err)
	}
	inflight, err := inferencev1.NewInferenceServiceClient(conn).Generate(context.Background(), &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_Text{Text: "hello"},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: 4, IgnoreEos: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inflight.Header(); err != nil { // accepted by the scheduler
		t.Fatal(err)
	}

	cancel() // the first signal
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health after the signal: %v, %v", r.GetStatus(), err)
	}
	wcancel()
	fresh := dialTCP(t, addr, nil) // a new TCP connection: the port is still open
	r, err := healthpb.NewHealthClient(fresh).Check(context.Background(), &healthpb.HealthCheckRequest{Service: server.ServiceName})
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health on a new connection while draining: %v, %v; want NOT_SERVING", r.GetStatus(), err)
	}
	ic := inferencev1.NewInferenceServiceClient(fresh)
	want := refused{Code: codes.Unavailable, Reason: server.ReasonDraining, Retry: true}
	_, err = ic.GetModelInfo(context.Background(), &inferencev1.GetModelInfoRequest{})
	if diff := cmp.Diff(want, refusalOf(err)); diff != "" {
		t.Errorf("GetModelInfo while draining (-want +got):\n%s", diff)
	}
	s, err := ic.Generate(context.Background(), &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_Text{Text: "late"}})
	if err == nil {
		_, err = s.Recv()
	}
	if diff := cmp.Diff(want, refusalOf(err)); diff != "" {
		t.Errorf("Generate while draining (-want +got):\n%s", diff)
	}
	select {
	case err := <-done:
		t.Fatalf("serve returned with a stream in flight: %v", err)
	default:
	}

	close(b.gate)
	end := readStream(inflight, make(chan struct{}))
	if !end.final || end.code != codes.OK || end.tokens != 4 {
		t.Errorf("in-flight stream: %+v; want a normal end after 4 tokens", end)
	}
	if err := <-done; err != nil {
		t.Errorf("serve after a completed drain = %v, want nil", err)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T, dir, name string) (certFile, keyFile string, serial *big.Int) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err = rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, serial
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// While the model loads with TLS and --auth-token-file: a plaintext
// client gets nothing, a TLS client reads health NOT_SERVING, gets
// UNAUTHENTICATED without the token and LOADING with it; after loading
// the token from the file (its newline trimmed) is the one required. The
// token appears in no log line.
func TestLoadingSpeaksTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := writeCert(t, dir, "weft-test")
	const token = "s3cret-token-xyz"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseServeFlags([]string{"--backend", "cpu", "--kv-memory", "4MiB", "--log-level", "debug",
		"--tls-cert", certFile, "--tls-key", keyFile, "--auth-token-file", tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.loadSecrets(); err != nil {
		t.Fatal(err)
	}
	certs, err := newCertStore(c.TLSCert, c.TLSKey)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	release := make(chan struct{})
	load := func(serveConfig, *slog.Logger) (*runtime.Model, error) {
		<-release
		return runtime.LoadDefault()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- loadAndServe(ctx, c, serveDeps{Log: log, TLS: certs.config()}, lis, nil, load, ready)
	}()

	caPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tlsCreds := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}

	plain := dialTCP(t, addr, nil)
	pctx, pcancel := short()
	if _, err := healthpb.NewHealthClient(plain).Check(pctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Errorf("a plaintext client read health while loading with TLS on")
	}
	pcancel()

	sec := dialTCP(t, addr, tlsCreds)
	hctx, hcancel := short()
	r, err := healthpb.NewHealthClient(sec).Check(hctx, &healthpb.HealthCheckRequest{Service: server.ServiceName}, grpc.WaitForReady(true))
	hcancel()
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("TLS health while loading: %v, %v; want NOT_SERVING", r.GetStatus(), err)
	}
	ic := inferencev1.NewInferenceServiceClient(sec)
	withToken := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	_, err = ic.GetModelInfo(context.Background(), &inferencev1.GetModelInfoRequest{})
	if diff := cmp.Diff(refused{Code: codes.Unauthenticated, Reason: server.ReasonUnauthenticated}, refusalOf(err)); diff != "" {
		t.Errorf("GetModelInfo without a token while loading (-want +got):\n%s", diff)
	}
	_, err = ic.GetModelInfo(withToken, &inferencev1.GetModelInfoRequest{})
	if diff := cmp.Diff(refused{Code: codes.Unavailable, Reason: "LOADING"}, refusalOf(err)); diff != "" {
		t.Errorf("GetModelInfo with the token while loading (-want +got):\n%s", diff)
	}

	close(release)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("loadAndServe: %v", err)
	}
	fresh := dialTCP(t, addr, tlsCreds)
	fc := inferencev1.NewInferenceServiceClient(fresh)
	_, err = fc.GetModelInfo(context.Background(), &inferencev1.GetModelInfoRequest{}, grpc.WaitForReady(true))
	if got := refusalOf(err); got.Code != codes.Unauthenticated {
		t.Errorf("GetModelInfo without a token after loading: %v, want UNAUTHENTICATED", err)
	}
	if _, err := fc.GetModelInfo(withToken, &inferencev1.GetModelInfoRequest{}); err != nil {
		t.Errorf("GetModelInfo with the file's token: %v", err)
	}
	_, err = fc.GetModelInfo(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token+"\n"), &inferencev1.GetModelInfoRequest{})
	if err == nil {
		t.Errorf("the token with its newline was accepted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("loadAndServe: %v", err)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the token appears in the log:\n%s", logs.String())
	}
}

// A bad certificate path fails at once, before the model is loaded (the
// model path does not exist either; the error is about TLS).
func TestServeBadCertFailsBeforeLoad(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := writeCert(t, dir, "weft-test")
	for _, tc := range []struct{ name, cert, key string }{
		{"missing cert", filepath.Join(dir, "nope.pem"), keyFile},
		{"missing key", certFile, filepath.Join(dir, "nope.pem")},
		{"key is not a key", certFile, certFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runServe(context.Background(), []string{"--addr", "127.0.0.1:0", "--metrics-addr", "",
				"--model", filepath.Join(dir, "no-such-model.gguf"), "--tls-cert", tc.cert, "--tls-key", tc.key})
			if err == nil || !strings.HasPrefix(err.Error(), "TLS:") {
				t.Errorf("runServe = %v; want a TLS error before the model loads", err)
			}
		})
	}
}

// The certificate is reloaded in place: new handshakes get the new one.
func TestCertStoreReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, first := writeCert(t, dir, "first")
	certs, err := newCertStore(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", certs.config())
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	served := make(chan struct{})
	go func() { // ends when lis is closed
		defer close(served)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	serial := func() *big.Int {
		t.Helper()
		c, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test reads the serial only
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber
	}
	if got := serial(); got.Cmp(first) != 0 {
		t.Fatalf("serial %v, want %v", got, first)
	}
	_, _, second := writeCert(t, dir, "second")
	if err := certs.reload(); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got.Cmp(second) != 0 {
		t.Errorf("after reload: serial %v, want %v", got, second)
	}
	if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := certs.reload(); err == nil {
		t.Errorf("reload of a garbage certificate succeeded")
	}
	if got := serial(); got.Cmp(second) != 0 {
		t.Errorf("after a failed reload: serial %v, want %v (the current one kept)", got, second)
	}
	lis.Close()
	<-served
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
		wantErr             bool
	}{
		{"newline", "tok\n", "tok", false},
		{"crlf", "tok\r\n", "tok", false},
		{"no newline", "tok", "tok", false},
		{"empty", "\n", "", true},
		{"two lines", "a\nb\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readTokenFile(p)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("readTokenFile(%q) = %q, %v; want %q, error %v", tc.content, got, err, tc.want, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), strings.TrimSpace(tc.content)) && strings.TrimSpace(tc.content) != "" {
				t.Errorf("error %q shows the file's content", err)
			}
		})
	}
	if _, err := readTokenFile(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("a missing token file was accepted")
	}
	if _, err := parseServeFlags([]string{"--auth-token", "x", "--auth-token-file", "f"}); err == nil {
		t.Errorf("--auth-token with --auth-token-file accepted")
	}
}

// cancelOnWrite cancels a context at the first write it sees (the first
// streamed token): a SIGINT in the middle of a generation.
type cancelOnWrite struct {
	cancel context.CancelFunc
	buf    bytes.Buffer
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return w.buf.Write(p)
}

// An interrupted `weft generate` stops between two steps with
// context.Canceled (main prints "interrupted", exit 130) after releasing
// its backend and model; it does not run to --max-tokens.
func TestGenerateInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelOnWrite{cancel: cancel}
	args := []string{"--model", shareddata.Path(t, "models/stories260K.gguf"), "--prompt", "Once upon a time",
		"--max-tokens", "1000", "--temperature", "0"}
	err := generateCmd(ctx, args, w, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("generateCmd after cancel = %v, want context.Canceled", err)
	}
	if w.buf.Len() == 0 || w.buf.Len() > 200 {
		t.Errorf("wrote %d bytes; want the first token(s) only", w.buf.Len())
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/cpu"
)

// writeSelfSigned writes a self-signed certificate for dnsName (no IP
// names, so dialling 127.0.0.1 verifies only with --tls-server-name) and
// its key into dir; it returns the two paths.
func writeSelfSigned(t *testing.T, dir, dnsName string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: dnsName},
		DNSNames:              []string{dnsName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, dnsName+".pem"), filepath.Join(dir, dnsName+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// startSecureServe runs serve on the built-in model with TLS (cert, key)
// and a bearer token, and returns its address.
func startSecureServe(t *testing.T, cert, key, token string) string {
	t.Helper()
	m, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f16", Threads: 2, NumBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c, err := parseServeFlags([]string{"--backend", "cpu", "--tls-cert", cert, "--tls-key", key, "--auth-token", token})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := newCertStore(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := startWhenReady(t, func(ready chan<- struct{}) error {
		return serve(ctx, c, serveDeps{Model: m, Backend: b, BackendWhy: "--backend cpu", Log: slog.New(slog.DiscardHandler), TLS: certs.config()}, lis, nil, ready)
	})
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v", err)
		}
	})
	return lis.Addr().String()
}

// TestClientFlagsTLSAuth dials a TLS + bearer-token server with each
// combination of the shared client flags and checks which ones get an
// authenticated call through (GetModelInfo needs the token; health does not).
func TestClientFlagsTLSAuth(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir, "weft.test")
	otherCA, _ := writeSelfSigned(t, dir, "other.test")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startSecureServe(t, cert, key, "s3cret")
	trusted := []string{"--tls", "--tls-ca", cert, "--tls-server-name", "weft.test"}

	tests := []struct {
		name    string
		flags   []string
		want    codes.Code // of GetModelInfo
		wantErr string     // dialOptions' error, if any
	}{
		{name: "tls and token", flags: append(trusted, "--auth-token", "s3cret"), want: codes.OK},
		{name: "tls and token file", flags: append(trusted, "--auth-token-file", tokenFile), want: codes.OK},
		{name: "tls-ca implies tls", flags: []string{"--tls-ca", cert, "--tls-server-name", "weft.test", "--auth-token", "s3cret"}, want: codes.OK},
		{name: "no token", flags: trusted, want: codes.Unauthenticated},
		{name: "wrong token", flags: append(trusted, "--auth-token", "guess"), want: codes.Unauthenticated},
		{name: "plaintext to a TLS server", flags: []string{"--auth-token", "s3cret"}, want: codes.Unavailable},
		{name: "system roots do not trust it", flags: []string{"--tls", "--tls-server-name", "weft.test", "--auth-token", "s3cret"}, want: codes.Unavailable},
		{name: "another CA", flags: []string{"--tls-ca", otherCA, "--tls-server-name", "weft.test", "--auth-token", "s3cret"}, want: codes.Unavailable},
		{name: "name not in the certificate", flags: []string{"--tls-ca", cert, "--auth-token", "s3cret"}, want: codes.Unavailable},
		{name: "token and token file", flags: append(trusted, "--auth-token", "a", "--auth-token-file", tokenFile), wantErr: "not both"},
		{name: "empty token file", flags: append(trusted, "--auth-token-file", emptyFile), wantErr: "is empty"},
		{name: "missing CA file", flags: []string{"--tls-ca", filepath.Join(dir, "nope")}, wantErr: "--tls-ca"},
		{name: "CA file without PEM", flags: []string{"--tls-ca", tokenFile}, wantErr: "no PEM certificate"},
		{name: "server name without tls", flags: []string{"--tls-server-name", "weft.test"}, wantErr: "needs --tls"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("client", flag.ContinueOnError)
			var cf clientFlags
			cf.register(fs)
			if err := fs.Parse(append([]string{"--addr", addr}, tc.flags...)); err != nil {
				t.Fatal(err)
			}
			conn, err := cf.dial()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("dial: err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err = inferencev1.NewInferenceServiceClient(conn).GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
			if got := status.Code(err); got != tc.want {
				t.Errorf("GetModelInfo: %v (code %v), want code %v", err, got, tc.want)
			}
		})
	}

	// The subcommands take the same flags.
	t.Run("bench", func(t *testing.T) {
		var out, errb bytes.Buffer
		args := append(append([]string{"--addr", addr}, trusted...), "--auth-token-file", tokenFile,
			"--format", "json", "--requests", "2", "--concurrency", "1", "--warmup", "0", "--prompt-len", "4", "--output-len", "3")
		if err := runBench(t.Context(), args, &out, &errb); err != nil {
			t.Fatalf("bench: %v\n%s", err, errb.String())
		}
		var res struct {
			Requests int `json:"requests"`
			Failed   int `json:"failed"`
		}
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if res.Requests != 2 || res.Failed != 0 {
			t.Errorf("bench: %d requests, %d failed; want 2 and 0", res.Requests, res.Failed)
		}
	})
	t.Run("healthcheck", func(t *testing.T) {
		noEnv := func(string) (string, bool) { return "", false }
		for _, args := range [][]string{
			{"--tls"}, // skip-verify local probe
			{"--tls-cert", cert},
			append([]string(nil), trusted...),
		} {
			if err := healthcheck(t.Context(), append([]string{"--addr", addr}, args...), noEnv); err != nil {
				t.Errorf("healthcheck %q: %v", args, err)
			}
		}
		if err := healthcheck(t.Context(), []string{"--addr", addr, "--tls-cert", otherCA, "--timeout", "2s"}, noEnv); err == nil {
			t.Errorf("healthcheck pinned to another certificate succeeded")
		}
		// In a container: the server's environment alone.
		_, port, _ := net.SplitHostPort(addr)
		env := map[string]string{"WEFT_ADDR": "0.0.0.0:" + port, "WEFT_TLS_CERT": cert, "WEFT_TLS_KEY": key, "WEFT_AUTH_TOKEN": "s3cret"}
		if err := healthcheck(t.Context(), nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
			t.Errorf("healthcheck with the server's environment: %v", err)
		}
	})
}

func TestProbeAddr(t *testing.T) {
	for in, want := range map[string]string{
		":50051":          "127.0.0.1:50051",
		"0.0.0.0:50051":   "127.0.0.1:50051",
		"[::]:50051":      "[::1]:50051",
		"10.0.0.5:50051":  "10.0.0.5:50051",
		"weft.test:443":   "weft.test:443",
		"unix:///tmp/s":   "unix:///tmp/s",
		"127.0.0.1:50051": "127.0.0.1:50051",
	} {
		if got := probeAddr(in); got != want {
			t.Errorf("probeAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// clientFlags are the connection flags every client subcommand (chat, bench,
// healthcheck) shares.
type clientFlags struct {
	Addr          string // server host:port
	TLS           bool   // dial with TLS
	TLSCA         string // PEM file of CA certificates to trust ("": the system's)
	TLSServerName string // name to verify the certificate against ("": the host of Addr)
	AuthToken     string // bearer token sent on every RPC
	AuthTokenFile string // file holding the bearer token (surrounding whitespace trimmed)

	// skipVerifyWithoutCA makes --tls without --tls-ca skip certificate
	// verification (healthcheck: a local liveness probe of the server's
	// own port). Set by the subcommand, not a flag.
	skipVerifyWithoutCA bool
	// pinnedCert, when set, is a PEM certificate file the server must
	// present exactly (healthcheck --tls-cert); it implies TLS.
	pinnedCert string
}

// register defines the client flags on fs.
func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:50051", "server `host:port`")
	fs.BoolVar(&c.TLS, "tls", false, "connect with TLS")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "PEM `file` of CA certificates to trust (implies --tls; default: the system's)")
	fs.StringVar(&c.TLSServerName, "tls-server-name", "", "`name` the server's certificate must carry (default: the host of --addr)")
	fs.StringVar(&c.AuthToken, "auth-token", "", "bearer `token` sent with every call")
	fs.StringVar(&c.AuthTokenFile, "auth-token-file", "", "`file` holding the bearer token (instead of --auth-token)")
}

// token is the bearer token from --auth-token or --auth-token-file ("" for none).
func (c *clientFlags) token() (string, error) {
	if c.AuthTokenFile == "" {
		return c.AuthToken, nil
	}
	if c.AuthToken != "" {
		return "", errors.New("give --auth-token or --auth-token-file, not both")
	}
	b, err := os.ReadFile(c.AuthTokenFile)
	if err != nil {
		return "", fmt.Errorf("--auth-token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("--auth-token-file %s is empty", c.AuthTokenFile)
	}
	return t, nil
}

// tlsConfig is the client TLS configuration, or nil for plaintext.
func (c *clientFlags) tlsConfig() (*tls.Config, error) {
	if !c.TLS && c.TLSCA == "" && c.pinnedCert == "" {
		if c.TLSServerName != "" {
			return nil, errors.New("--tls-server-name needs --tls")
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if c.TLSCA != "" {
		data, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", c.TLSCA)
		}
		cfg.RootCAs = pool
		return cfg, nil
	}
	if c.pinnedCert != "" {
		data, err := os.ReadFile(c.pinnedCert)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert: %w", err)
		}
		leaf := firstPEMCert(data)
		if leaf == nil {
			return nil, fmt.Errorf("--tls-cert %s: no PEM certificate in it", c.pinnedCert)
		}
		// The probe checks the server presents exactly this certificate
		// (a pin), so no name or chain needs to match.
		cfg.InsecureSkipVerify = true //nolint:gosec // replaced by the pin below
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || string(raw[0]) != string(leaf) {
				return fmt.Errorf("the server's certificate is not %s", c.pinnedCert)
			}
			return nil
		}
		return cfg, nil
	}
	if c.skipVerifyWithoutCA {
		cfg.InsecureSkipVerify = true //nolint:gosec // local liveness probe
	}
	return cfg, nil
}

// dialOptions are the grpc.DialOptions the flags describe: transport
// credentials (TLS or plaintext) and, with a token, per-RPC bearer
// credentials.
func (c *clientFlags) dialOptions() ([]grpc.DialOption, error) {
	tcfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if tcfg != nil {
		creds = credentials.NewTLS(tcfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	tok, err := c.token()
	if err != nil {
		return nil, err
	}
	if tok != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: tok}))
	}
	return opts, nil
}

// dial connects to c.Addr with c's options.
func (c *clientFlags) dial() (*grpc.ClientConn, error) {
	opts, err := c.dialOptions()
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(c.Addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", c.Addr, err)
	}
	return conn, nil
}

// bearer sends "authorization: Bearer <token>" with every RPC. A plaintext
// connection may carry it too (the server accepts it there; local use), so
// it does not require transport security.
type bearer struct{ token string }

var _ credentials.PerRPCCredentials = bearer{}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return false }

// firstPEMCert is the DER bytes of the first CERTIFICATE block in data, or nil.
func firstPEMCert(data []byte) []byte {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if b.Type == "CERTIFICATE" {
			return b.Bytes
		}
	}
}

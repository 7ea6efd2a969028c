package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/weft-inference/weft/server"
)

func init() {
	register(command{name: "healthcheck", short: "probe a server's gRPC health (for container HEALTHCHECK)", run: runHealthcheck})
}

// runHealthcheck dials the health service and fails unless the server
// reports SERVING. It takes the client flags and reads them, like serve,
// from WEFT_* variables, so in a container it follows the server's own
// WEFT_ADDR (a wildcard host such as 0.0.0.0 is probed on loopback) and
// WEFT_TLS_CERT (TLS, and the server must present that certificate).
// --tls without --tls-ca or --tls-cert skips verification: a local probe.
func runHealthcheck(ctx context.Context, args []string) error {
	return healthcheck(ctx, args, os.LookupEnv)
}

// healthcheck is runHealthcheck with the environment read through lookup.
func healthcheck(ctx context.Context, args []string, lookup func(string) (string, bool)) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	cf.skipVerifyWithoutCA = true
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.StringVar(&cf.pinnedCert, "tls-cert", "", "the server's PEM certificate `file` (as serve's --tls-cert): use TLS and require exactly this certificate")
	if err := parseWithEnv(fs, args, lookup); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cf.Addr = probeAddr(cf.Addr)
	conn, err := cf.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: server.ServiceName})
	if err != nil {
		return err
	}
	if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %v", cf.Addr, r.GetStatus())
	}
	fmt.Println("SERVING")
	return nil
}

// probeAddr turns a listen address into one to dial: an empty or wildcard
// host (":50051", "0.0.0.0:50051", "[::]:50051") becomes loopback.
func probeAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	switch host {
	case "", "0.0.0.0":
		return net.JoinHostPort("127.0.0.1", port)
	case "::":
		return net.JoinHostPort("::1", port)
	}
	return addr
}

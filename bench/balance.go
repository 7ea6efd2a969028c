package bench

import (
	"fmt"
	"strings"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/weightedroundrobin" // registers weighted_round_robin
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// Client-side balancing policies DialTargets accepts.
const (
	PickFirst          = "pick_first"
	RoundRobin         = "round_robin"
	WeightedRoundRobin = "weighted_round_robin"
)

// ServiceConfig is the gRPC service config that selects policy lb. For
// weighted_round_robin the weights come from the replicas' out-of-band ORCA
// reports (weft sends them at most every 100ms), refreshed every 100ms and
// used after a 200ms blackout, so a replica that slows down loses traffic
// within about a second.
func ServiceConfig(lb string) (string, error) {
	switch lb {
	case PickFirst, RoundRobin:
		return fmt.Sprintf(`{"loadBalancingConfig": [{%q: {}}]}`, lb), nil
	case WeightedRoundRobin:
		return `{"loadBalancingConfig": [{"weighted_round_robin": {
  "enableOobLoadReport": true,
  "oobReportingPeriod": "0.1s",
  "blackoutPeriod": "0.2s",
  "weightUpdatePeriod": "0.1s",
  "weightExpirationPeriod": "10s"
}}]}`, nil
	}
	return "", fmt.Errorf("bench: balancing policy %q: want %s, %s or %s", lb, RoundRobin, WeightedRoundRobin, PickFirst)
}

// DialTargets connects to one or more servers balanced by policy lb. A
// single target with a scheme ("dns:///weft-grpc:50051", as a headless
// Service resolves) goes to gRPC's resolver; otherwise the HOST:PORT list is
// handed to a manual resolver as a static address list.
func DialTargets(targets []string, lb string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if len(targets) == 0 {
		return nil, fmt.Errorf("bench: no targets")
	}
	sc, err := ServiceConfig(lb)
	if err != nil {
		return nil, err
	}
	opts = append(opts, grpc.WithDefaultServiceConfig(sc))
	if len(targets) == 1 && strings.Contains(targets[0], ":///") {
		return grpc.NewClient(targets[0], opts...)
	}
	addrs := make([]resolver.Address, len(targets))
	for i, t := range targets {
		if strings.Contains(t, "://") {
			return nil, fmt.Errorf("bench: target %q: a scheme works only as the single target", t)
		}
		addrs[i] = resolver.Address{Addr: t}
	}
	r := manual.NewBuilderWithScheme("weft-bench")
	r.InitialState(resolver.State{Addresses: addrs})
	return grpc.NewClient(r.Scheme()+":///targets", append(opts, grpc.WithResolvers(r))...)
}

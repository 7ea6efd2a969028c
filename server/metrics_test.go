package server

import (
	"testing"
)

// gaugeValue reads a gauge from the server's registry.
func gaugeValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

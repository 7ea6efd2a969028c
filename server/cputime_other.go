//go:build !unix

package server

import "time"

// processCPU reports no CPU time where getrusage does not exist; the load
// report then leaves the CPU utilization out.
func processCPU() (time.Duration, bool) { return 0, false }

//go:build race

package kernels

// raceEnabled trims the arithmetic-heavy tests under the race detector
// (which checks concurrency, not arithmetic); full runs happen without it.
const raceEnabled = true

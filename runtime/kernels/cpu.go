package kernels

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

type isaKind int

const (
	isaGo     isaKind = iota // pure Go
	isaC                     // portable C (compiler's baseline vectors)
	isaAVX2                  // AVX2 + FMA + F16C
	isaAVX512                // AVX-512 F/BW/VL/DQ + FMA + F16C
	isaVNNI                  // isaAVX512 plus VNNI: integer dot products for few tokens
)

func (k isaKind) String() string {
	return [...]string{"go", "c", "avx2", "avx512", "avx512vnni"}[k]
}

// activeISA is chosen once at start-up from what the CPU offers.
var activeISA = bestISA()

func bestISA() isaKind {
	if !cgoKernels {
		return isaGo
	}
	if !x86Kernels() {
		return isaC
	}
	x := cpu.X86
	switch {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512DQ && x.HasAVX512VNNI && x.HasFMA && x.HasAVX2 && x.HasOSXSAVE:
		return isaVNNI
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512DQ && x.HasFMA && x.HasAVX2 && x.HasOSXSAVE:
		return isaAVX512
	case x.HasAVX2 && x.HasFMA && x.HasOSXSAVE:
		return isaAVX2 // every AVX2 CPU also has F16C
	}
	return isaC
}

// ISA names the kernel set in use: "avx512vnni", "avx512", "avx2", "c" or "go".
func ISA() string { return activeISA.String() }

// CompiledISAs names the kernel sets built into this binary, best last:
// "go" always; with cgo "c", and on amd64 "avx2", "avx512" and "avx512vnni"
// too (unless the C code was built with -DWEFT_PORTABLE_ONLY, a test
// setting). ISA is the best of them the CPU runs.
func CompiledISAs() []string {
	out := []string{isaGo.String()}
	if !cgoKernels {
		return out
	}
	out = append(out, isaC.String())
	if x86Kernels() {
		out = append(out, isaAVX2.String(), isaAVX512.String(), isaVNNI.String())
	}
	return out
}

// availableISAs lists every kernel set this CPU can run, best last.
func availableISAs() []isaKind {
	var out []isaKind
	for k := isaGo; k <= bestISA(); k++ {
		out = append(out, k)
	}
	return out
}

// setISA switches kernels (tests and benchmarks); it returns the previous.
func setISA(k isaKind) isaKind {
	if k > bestISA() {
		panic(fmt.Sprintf("kernels: %v kernels not available on this CPU", k))
	}
	old := activeISA
	activeISA = k
	return old
}

// AvailableISAs names the kernel sets this CPU runs, best last (a prefix
// of CompiledISAs' order).
func AvailableISAs() []string {
	var out []string
	for _, k := range availableISAs() {
		out = append(out, k.String())
	}
	return out
}

// UseISA switches every product to the named kernel set (one of
// AvailableISAs) and returns the name of the one it replaces. It is for
// start-up (`weft bench --kernels`), tests and benchmarks: no product may
// run while it switches.
func UseISA(name string) (string, error) {
	for _, k := range availableISAs() {
		if k.String() == name {
			return setISA(k).String(), nil
		}
	}
	return "", fmt.Errorf("kernels: kernel set %q: this CPU runs %v", name, AvailableISAs())
}

// batchInvariant: see SetBatchInvariant.
var batchInvariant atomic.Bool

// SetBatchInvariant makes every matrix product batch-invariant (on) or
// free to pick its kernel by token count (off, the default), and returns
// the previous setting. Invariant products choose their kernel as for one
// token, whatever the number of tokens: a token's outputs are then the
// same bits whether it is alone or among any others, in any order. The CPU
// backend reads BatchInvariant to keep attention per token too. It costs
// the packed and lane GEMMs of prompts and large batches (BENCHMARKS.md
// §1e); like UseISA, it is set at start-up, never while products run.
func SetBatchInvariant(on bool) bool { return batchInvariant.Swap(on) }

// BatchInvariant reports SetBatchInvariant's setting.
func BatchInvariant() bool { return batchInvariant.Load() }

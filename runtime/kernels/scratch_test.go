//go:build cgo

package kernels

import (
	"math/rand/v2"
	goruntime "runtime"
	"sync"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
)

// TestScratchSetsBoundedByConcurrency: the C kernels' scratch is held per
// product, not per OS thread. Products run one after another on 40 fresh
// OS threads (each goroutine locks its thread and exits locked, so the
// runtime ends the thread) add at most the worker pool's size to the
// arena's set count; 100 products at once from as many goroutines (more
// than the pooled sets) all compute the sequential result, and the pool
// still counts at most its 64 sets. (The arena belongs to the C kernels:
// the file builds with cgo only.)
func TestScratchSetsBoundedByConcurrency(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Every product type the kernels take scratch for at 64 tokens: the
	// packed F32 GEMM, the int8 and VNNI row kernels' activations.
	const n = 64
	var ps []func(y []float32)
	var wants [][]float32
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeQ8_0, gguf.TypeQ4_K} {
		w := randomWeight(rng, typ, 64, 256)
		x := randomVec(rng, n*256)
		f := func(y []float32) { MatMul(y, w, x, n) }
		want := make([]float32, n*64)
		f(want)
		ps, wants = append(ps, f), append(wants, want)
	}
	bytes0, sets0 := Scratch()
	if bytes0 == 0 || sets0 == 0 {
		t.Fatalf("after the first products the arena holds %d bytes in %d sets: the products took no scratch, the test checks nothing", bytes0, sets0)
	}
	for range 40 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			goruntime.LockOSThread() // never unlocked: the thread ends with the goroutine
			for _, f := range ps {
				f(make([]float32, n*64))
			}
		}()
		<-done
	}
	if _, sets := Scratch(); sets > sets0+Workers() {
		t.Errorf("40 threads one after another: %d scratch sets, %d before (workers %d): the arena grows with the threads", sets, sets0, Workers())
	}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for g := range 100 {
		wg.Go(func() {
			i := g % len(ps)
			y := make([]float32, n*64)
			ps[i](y)
			for k := range y {
				if y[k] != wants[i][k] {
					errs <- "a concurrent product differs from the sequential one"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if _, sets := Scratch(); sets > 64 {
		t.Errorf("%d scratch sets: more than the pool's 64", sets)
	}
}

// TestScratchLowestFreeSet: a product takes the free pooled set of lowest
// index, whichever set its thread held before, so the sets ever held stay
// at most the products ever run at once. Three threads take sets in an
// order where remembering each thread's last set would creep: A holds set
// 0 while B and then C take one (each gets 1); then, A gone, B must take 0
// (not its last set, 1) and C beside it 1 (not 2: at most two sets were
// ever held at once, so a third is creep).
func TestScratchLowestFreeSet(t *testing.T) {
	type thread struct {
		cmd chan bool // true: take a set, false: return it
		idx chan int  // the index taken (or -2 after a return)
	}
	start := func() thread {
		th := thread{make(chan bool), make(chan int)}
		go func() {
			goruntime.LockOSThread() // never unlocked: the thread ends with the goroutine
			for take := range th.cmd {
				if take {
					th.idx <- scratchHold()
				} else {
					scratchRelease()
					th.idx <- -2
				}
			}
		}()
		return th
	}
	a, b, c := start(), start(), start()
	defer close(a.cmd)
	defer close(b.cmd)
	defer close(c.cmd)
	step := func(name string, th thread, take bool, want int) {
		t.Helper()
		th.cmd <- take
		if got := <-th.idx; take && got != want {
			t.Fatalf("%s took set %d, want %d (the lowest free)", name, got, want)
		}
	}
	step("A", a, true, 0)
	step("B", b, true, 1)
	step("B", b, false, 0)
	step("C", c, true, 1)
	step("C", c, false, 0)
	step("A", a, false, 0)
	step("B", b, true, 0)
	step("C", c, true, 1)
	step("C", c, false, 0)
	step("B", b, false, 0)
}

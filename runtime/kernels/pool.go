package kernels

import (
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"
)

// task is work shared by the caller and the pool: run claims pieces of it
// until none is left (the caller runs it too, so a task never waits for a
// worker). worker is the runner's index, 0 for the caller.
type task interface{ run(worker int) }

var (
	poolOnce sync.Once
	poolCh   chan task
	poolSize int // set once, under sizeMu: 0 until the pool starts

	sizeMu      sync.Mutex
	wantWorkers int // SetWorkers' request, 0: default
)

// SetWorkers fixes how many goroutines share matrix products and Parallel
// calls, the caller included (default: GOMAXPROCS at first use, at most one
// per CPU). It must come before the first MatMul or Parallel; it reports
// false, changing nothing, once the pool has started. It lets a program
// keep GOMAXPROCS above the compute threads (see cmd/weft).
func SetWorkers(n int) bool {
	sizeMu.Lock()
	defer sizeMu.Unlock()
	if poolSize != 0 || n < 1 {
		return false
	}
	wantWorkers = n
	return true
}

// spinFor is how long an idle worker polls for the next task before it
// parks. (Polling reads the wall clock: a pool first started inside a
// testing/synctest bubble would poll against the bubble's clock, which does
// not move while it polls. Start it outside, or keep matrix products out of
// bubbles.) A forward pass hands the pool a task every few tens of
// microseconds; waking a parked goroutine costs a futex round trip through
// the kernel (a share of a single-sequence decode step that BENCHMARKS.md
// §1 gives), while a polling worker picks a task up at once. It parks after spinFor
// of idleness, so an idle server burns no CPU.
const spinFor = 300 * time.Microsecond

// workers starts the pool on first use: SetWorkers' count, or GOMAXPROCS
// (at most one per CPU), less one goroutines that live for the rest of the
// process (the caller is the last worker).
func workers() int {
	poolOnce.Do(func() {
		sizeMu.Lock()
		poolSize = min(goruntime.GOMAXPROCS(0), goruntime.NumCPU())
		if wantWorkers > 0 {
			poolSize = wantWorkers
		}
		sizeMu.Unlock()
		poolCh = make(chan task, 4*poolSize)
		for id := 1; id < poolSize; id++ {
			go func() {
				for {
					recvTask().run(id)
				}
			}()
		}
	})
	return poolSize
}

// recvTask returns the next posted task, polling for spinFor before it
// blocks. It yields its P every few polls (Gosched), so a goroutine made
// ready on this P (the caller, a stream's sender) runs at once; yielding
// on every poll would cost a lock and often a thread wake-up each time.
func recvTask() task {
	start := time.Now()
	for i := 0; ; i++ {
		for range 64 {
			if len(poolCh) > 0 {
				select {
				case t := <-poolCh:
					return t
				default:
				}
			}
		}
		if i&7 == 7 && time.Since(start) > spinFor {
			return <-poolCh
		}
		goruntime.Gosched()
	}
}

// pending counts a task's unfinished pieces. wait polls it for a while
// before it blocks: parking the caller until the last worker's piece ends
// costs a futex sleep and wake-up, as much as a small product itself.
type pending struct {
	left atomic.Int32
	wg   sync.WaitGroup
}

func (p *pending) add(n int) {
	p.left.Add(int32(n))
	p.wg.Add(n)
}

func (p *pending) done() {
	p.left.Add(-1)
	p.wg.Done()
}

func (p *pending) wait() {
	start := time.Now()
	for i := 0; p.left.Load() > 0; i++ {
		if i&1023 == 1023 {
			if time.Since(start) > spinFor {
				break
			}
			goruntime.Gosched()
		}
	}
	p.wg.Wait()
}

// post offers t to up to k workers; a full queue (pool busy) is skipped:
// the caller then does more of the task itself.
func post(t task, k int) {
	for range k {
		select {
		case poolCh <- t:
		default:
			return
		}
	}
}

// procStart is the time base of maybeYield's clock.
var (
	procStart = time.Now()
	lastYield atomic.Int64 // ns since procStart
)

// yieldEvery: maybeYield's period, well inside sysmon's 10 ms.
const yieldEvery = 4 * time.Millisecond

// maybeYield passes the calling goroutine through the Go scheduler
// (Gosched) if no caller has done so for yieldEvery. A goroutine that
// runs products back to back, as a forward pass does, never reschedules
// otherwise: after 10 ms on one scheduler tick, Go's sysmon takes its P
// away in the middle of a cgo call and, having retaken one, keeps polling
// every 20 µs, a wake-up that preempts a compute thread each time.
// Yielding every yieldEvery keeps the P and halves the context switches
// of a prompt-heavy load.
func maybeYield() {
	now := int64(time.Since(procStart))
	if last := lastYield.Load(); now-last >= int64(yieldEvery) && lastYield.CompareAndSwap(last, now) {
		goruntime.Gosched()
	}
}

// Workers is the number of goroutines that Parallel may run fn on at once
// (the caller and the pool); worker indexes passed to fn are below it.
func Workers() int { return workers() }

// Parallel calls fn(worker, i) for every i < n, spread over the caller and
// the matmul worker pool, and returns when all calls have returned. worker
// (< Workers()) identifies the goroutine, so fn can use per-worker scratch;
// calls with the same worker never overlap. fn may call MatMul (a nested
// job is finished by whoever claims its pieces, the caller included) but
// not Parallel (worker indexes would repeat). Every call runs even when
// some fail; Parallel returns the failure of the lowest i that failed.
func Parallel(n int, fn func(worker, i int) error) error {
	if n <= 0 {
		return nil
	}
	parts := workers()
	if n == 1 || parts < 2 {
		var first error
		for i := range n {
			if err := fn(0, i); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	p := &parTask{n: int32(n), fn: fn}
	p.pend.add(n)
	post(p, min(parts, n)-1)
	p.run(0)
	p.pend.wait()
	if p.errs != nil {
		for _, err := range p.errs {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

type parTask struct {
	n    int32
	next atomic.Int32
	fn   func(worker, i int) error
	pend pending
	mu   sync.Mutex
	errs []error // by i, allocated on the first failure (under mu)
}

func (p *parTask) run(worker int) {
	for {
		i := p.next.Add(1) - 1
		if i >= p.n {
			return
		}
		if err := p.fn(worker, int(i)); err != nil {
			p.mu.Lock()
			if p.errs == nil {
				p.errs = make([]error, p.n)
			}
			p.errs[i] = err
			p.mu.Unlock()
		}
		p.pend.done()
	}
}

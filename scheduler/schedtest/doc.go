// Package schedtest holds the test doubles of the scheduler's Model and
// TextDecoder, shared by the scheduler's, the server's and the benchmarks'
// tests, so there is one fake model to trust.
//
// Model is a paged fake: it keeps a fake KV cache (the token stored at each
// position of each block) and samples the next token as a function of the
// whole history it reads back through the step's block table. A scheduler
// that feeds wrong positions, hands out wrong blocks or reuses a wrong
// prefix therefore changes the output, and Reference gives what an
// uninterrupted run must produce. A step does no I/O and never sleeps;
// tests that want steps to take time, to be gated or to fail say so with
// Gate, OnStep and Fail.
//
// The package imports only the step contract (runtime/batch, runtime/sample),
// not the scheduler, so the scheduler's own tests can use it.
//
// # Example
//
//	m := schedtest.NewModel(cfg.BlockSize, cfg.NumBlocks)
//	s, _ := scheduler.New(cfg, m)
//	...
//	want := schedtest.Reference(prompt, 10, nil)
package schedtest

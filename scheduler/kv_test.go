package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The ledger: free blocks first, then cached ones least recently released
// first; registered blocks are shared by reference and found by chain hash.
func TestBlockPool(t *testing.T) {
	p := newBlockPool(4, 2)
	refs := make([]int32, 4)
	check := func(when string) {
		t.Helper()
		if err := p.check(refs); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	alloc := func() int32 {
		t.Helper()
		b, ok := p.alloc()
		if !ok {
			t.Fatal("alloc failed")
		}
		refs[b]++
		return b
	}
	release := func(b int32) { p.release(b); refs[b]-- }

	var got []int32
	for range 4 {
		got = append(got, alloc())
	}
	if diff := cmp.Diff([]int32{0, 1, 2, 3}, got); diff != "" {
		t.Errorf("alloc order (-want +got):\n%s", diff)
	}
	if _, ok := p.alloc(); ok {
		t.Errorf("alloc from an empty pool succeeded")
	}
	check("full")

	h0 := chainHash(0, []int32{1, 2})
	h1 := chainHash(h0, []int32{3, 4})
	p.register(0, h0, 0, []int32{1, 2})
	p.register(1, h1, h0, []int32{3, 4})
	p.register(2, h0, 0, []int32{1, 2}) // same prefix: left unregistered
	check("registered")
	if b, ok := p.lookup(h1, h0, []int32{3, 4}); !ok || b != 1 {
		t.Errorf("lookup = %d, %v; want 1", b, ok)
	}
	if _, ok := p.lookup(h1, h0, []int32{3, 5}); ok {
		t.Errorf("lookup with other tokens under the same hash succeeded")
	}
	if _, ok := p.lookup(h1, 7, []int32{3, 4}); ok {
		t.Errorf("lookup with another parent succeeded")
	}

	// Shared: a second holder of block 0.
	p.acquire(0)
	refs[0]++
	release(0)
	check("shared")
	if p.state[0] != blockUsed {
		t.Errorf("block 0 released by one of two holders is %d", p.state[0])
	}
	release(1) // cached, LRU head
	release(0) // cached, after 1
	release(2) // unregistered: free
	check("released")
	if p.available() != 3 || p.lruLen != 2 || len(p.free) != 1 {
		t.Errorf("available %d, lru %d, free %d", p.available(), p.lruLen, len(p.free))
	}
	// A cached block taken back leaves the LRU list.
	p.acquire(0)
	refs[0]++
	check("reacquired")
	release(0)
	// Now LRU order is 1, 0. Allocation takes the free block, then evicts 1.
	if b := alloc(); b != 2 {
		t.Errorf("alloc took %d, want free block 2", b)
	}
	if b := alloc(); b != 1 {
		t.Errorf("alloc evicted %d, want least recently used 1", b)
	}
	if _, ok := p.lookup(h1, h0, []int32{3, 4}); ok {
		t.Errorf("evicted block still found")
	}
	check("evicted")
}

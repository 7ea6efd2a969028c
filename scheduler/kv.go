package scheduler

import (
	"fmt"
	"slices"
)

// Block states in the ledger. Every block is in exactly one.
const (
	blockFree   uint8 = iota // ref 0, no reusable content, on the free stack
	blockCached              // ref 0, holds a registered prefix, on the LRU list
	blockUsed                // ref > 0, held by running sequences
)

// blockPool is the KV block ledger with the prefix cache. It is owned by the
// scheduler goroutine; nothing here is safe for concurrent use.
//
// A full block whose K/V have been computed may be registered under the
// chain hash of its token prefix: hash(parent hash, block tokens). Registered
// blocks are shared by reference count; when the count drops to zero they
// stay reusable on an LRU list until the allocator needs them.
type blockPool struct {
	blockSize int
	state     []uint8
	ref       []int32
	// For registered blocks: their hash, their parent's hash and a copy of
	// their tokens (so a hash collision can never serve wrong K/V).
	hashed []bool
	hash   []uint64
	parent []uint64
	toks   [][]int32
	byHash map[uint64]int32

	free []int32 // stack of free blocks

	// LRU list of cached blocks, least recently released at head.
	prev, next       []int32
	lruHead, lruTail int32
	lruLen           int

	used int
}

func newBlockPool(numBlocks, blockSize int) *blockPool {
	p := &blockPool{
		blockSize: blockSize,
		state:     make([]uint8, numBlocks),
		ref:       make([]int32, numBlocks),
		hashed:    make([]bool, numBlocks),
		hash:      make([]uint64, numBlocks),
		parent:    make([]uint64, numBlocks),
		toks:      make([][]int32, numBlocks),
		byHash:    make(map[uint64]int32),
		free:      make([]int32, numBlocks),
		prev:      make([]int32, numBlocks),
		next:      make([]int32, numBlocks),
		lruHead:   -1,
		lruTail:   -1,
	}
	// Pop order 0, 1, 2, ... (the stack's top is its end).
	for i := range p.free {
		p.free[i] = int32(numBlocks - 1 - i)
	}
	return p
}

func (p *blockPool) total() int { return len(p.state) }

// available is the number of blocks alloc can hand out: free plus cached.
func (p *blockPool) available() int { return len(p.free) + p.lruLen }

func (p *blockPool) lruRemove(b int32) {
	pv, nx := p.prev[b], p.next[b]
	if pv >= 0 {
		p.next[pv] = nx
	} else {
		p.lruHead = nx
	}
	if nx >= 0 {
		p.prev[nx] = pv
	} else {
		p.lruTail = pv
	}
	p.prev[b], p.next[b] = -1, -1
	p.lruLen--
}

func (p *blockPool) lruPush(b int32) {
	p.prev[b], p.next[b] = p.lruTail, -1
	if p.lruTail >= 0 {
		p.next[p.lruTail] = b
	} else {
		p.lruHead = b
	}
	p.lruTail = b
	p.lruLen++
}

func (p *blockPool) unregister(b int32) {
	if !p.hashed[b] {
		return
	}
	if p.byHash[p.hash[b]] == b {
		delete(p.byHash, p.hash[b])
	}
	p.hashed[b] = false
	p.toks[b] = p.toks[b][:0]
}

// alloc hands out a block with ref 1: a free one, else the least recently
// used cached one (evicting its prefix). ok is false when none is left.
func (p *blockPool) alloc() (b int32, ok bool) {
	switch {
	case len(p.free) > 0:
		b = p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
	case p.lruLen > 0:
		b = p.lruHead
		p.lruRemove(b)
		p.unregister(b)
	default:
		return -1, false
	}
	p.state[b] = blockUsed
	p.ref[b] = 1
	p.used++
	return b, true
}

// lookup finds the registered block for (h, parent, toks) without taking it.
func (p *blockPool) lookup(h, parent uint64, toks []int32) (int32, bool) {
	b, ok := p.byHash[h]
	if !ok || p.parent[b] != parent || !slices.Equal(p.toks[b], toks) {
		return -1, false
	}
	return b, true
}

// acquire takes one more reference to a registered block.
func (p *blockPool) acquire(b int32) {
	if p.state[b] == blockCached {
		p.lruRemove(b)
		p.state[b] = blockUsed
		p.used++
	}
	p.ref[b]++
}

// release drops one reference; the last one sends the block to the LRU list
// (registered) or the free stack.
func (p *blockPool) release(b int32) {
	if p.ref[b] <= 0 {
		panic(fmt.Sprintf("scheduler: release of block %d with ref %d", b, p.ref[b]))
	}
	p.ref[b]--
	if p.ref[b] > 0 {
		return
	}
	p.used--
	if p.hashed[b] {
		p.state[b] = blockCached
		p.lruPush(b)
		return
	}
	p.state[b] = blockFree
	p.free = append(p.free, b)
}

// register records that used block b holds the full block of tokens toks
// whose chain hash is h. A block already registered, or a hash already
// served by another block, is left alone.
func (p *blockPool) register(b int32, h, parent uint64, toks []int32) {
	if p.hashed[b] {
		return
	}
	if _, dup := p.byHash[h]; dup {
		return
	}
	p.hashed[b] = true
	p.hash[b] = h
	p.parent[b] = parent
	p.toks[b] = append(p.toks[b][:0], toks...)
	p.byHash[h] = b
}

// check verifies the ledger against the references the live sequences
// hold (refs[b] = number of block tables that contain b).
func (p *blockPool) check(refs []int32) error {
	n := p.total()
	inFree := make([]bool, n)
	for _, b := range p.free {
		if inFree[b] {
			return fmt.Errorf("block %d twice on the free stack", b)
		}
		inFree[b] = true
	}
	inLRU := make([]bool, n)
	cnt := 0
	last := int32(-1)
	for b := p.lruHead; b >= 0; b = p.next[b] {
		if inLRU[b] || cnt > n {
			return fmt.Errorf("LRU list has a cycle at block %d", b)
		}
		if p.prev[b] != last {
			return fmt.Errorf("LRU list: block %d prev %d, want %d", b, p.prev[b], last)
		}
		inLRU[b] = true
		last = b
		cnt++
	}
	if last != p.lruTail || cnt != p.lruLen {
		return fmt.Errorf("LRU list: tail %d len %d, walked to %d over %d", p.lruTail, p.lruLen, last, cnt)
	}
	used := 0
	for b := range n {
		var want uint8
		switch {
		case p.ref[b] > 0:
			want = blockUsed
			used++
		case p.hashed[b]:
			want = blockCached
		default:
			want = blockFree
		}
		if p.state[b] != want {
			return fmt.Errorf("block %d: state %d, want %d (ref %d, hashed %v)", b, p.state[b], want, p.ref[b], p.hashed[b])
		}
		if p.ref[b] != refs[b] {
			return fmt.Errorf("block %d: ref %d, but %d block tables hold it", b, p.ref[b], refs[b])
		}
		if inFree[b] != (want == blockFree) || inLRU[b] != (want == blockCached) {
			return fmt.Errorf("block %d: state %d, on free stack %v, on LRU %v", b, want, inFree[b], inLRU[b])
		}
		if p.hashed[b] {
			if got, ok := p.byHash[p.hash[b]]; !ok || got != int32(b) {
				return fmt.Errorf("block %d: registered hash %x maps to %d", b, p.hash[b], got)
			}
			if len(p.toks[b]) != p.blockSize {
				return fmt.Errorf("block %d: registered with %d tokens", b, len(p.toks[b]))
			}
		}
	}
	for h, b := range p.byHash {
		if !p.hashed[b] || p.hash[b] != h {
			return fmt.Errorf("hash %x maps to block %d which is not registered under it", h, b)
		}
	}
	if used != p.used {
		return fmt.Errorf("used count %d, counted %d", p.used, used)
	}
	return nil
}

// chainHash is the prefix-cache key of a full block: it mixes the parent
// block's key with the block's tokens (FNV-1a over 32-bit tokens, then a
// splitmix finalizer).
func chainHash(parent uint64, toks []int32) uint64 {
	const prime = 1099511628211
	h := parent ^ 14695981039346656037
	for _, t := range toks {
		h ^= uint64(uint32(t))
		h *= prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

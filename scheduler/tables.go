package scheduler

import "github.com/weft-inference/weft/runtime/batch"

// A sequence's block tables, one per layer group of the pool
// (Config.KVWindows; one table when it is nil). Every table has the same
// number of rows: row i holds positions [i*BlockSize, (i+1)*BlockSize) of
// its group's layers. A row is allocated in all groups at once (addRow).
// In a window group, the rows below batch.FirstRow(window, BlockSize,
// computed) hold K/V that no later query reads: slide gives them back
// and marks them -1, so such a group holds at most batch.WindowRows
// blocks of a decoding sequence, whatever its length.

// groups is the number of block tables of a sequence.
func (c *core) groups() int { return max(len(c.cfg.KVWindows), 1) }

// window is group g's sliding window (0: the whole context).
func (c *core) window(g int) int {
	if c.cfg.KVWindows == nil {
		return 0
	}
	return c.cfg.KVWindows[g]
}

// rows is the number of block rows sq's tables have.
func (sq *seq) rows() int {
	if len(sq.tables) == 0 {
		return 0
	}
	return len(sq.tables[0])
}

// initTables gives sq one empty table per group.
func (c *core) initTables(sq *seq) {
	if len(sq.tables) != c.groups() {
		sq.tables = make([][]int32, c.groups())
		sq.first = make([]int, c.groups())
	}
	for g := range sq.tables {
		sq.tables[g] = sq.tables[g][:0]
		sq.first[g] = 0
	}
}

// addRow appends a row of new blocks to every table of sq. It takes
// nothing and returns false when the pool has fewer blocks than groups.
func (c *core) addRow(sq *seq) bool {
	if c.pool.available() < len(sq.tables) {
		return false
	}
	for g := range sq.tables {
		b, _ := c.pool.alloc()
		sq.tables[g] = append(sq.tables[g], b)
	}
	return true
}

// slide gives back the blocks of sq's window groups that no query after
// its computed positions can see, oldest first (the LRU list evicts them
// first).
func (c *core) slide(sq *seq) {
	if c.cfg.KVWindows == nil {
		return
	}
	bs := c.cfg.BlockSize
	for g, w := range c.cfg.KVWindows {
		if w <= 0 {
			continue
		}
		f := min(batch.FirstRow(w, bs, sq.computed), len(sq.tables[g]))
		t := sq.tables[g]
		for i := sq.first[g]; i < f; i++ {
			c.pool.release(t[i])
			t[i] = -1
		}
		sq.first[g] = max(sq.first[g], f)
	}
}

// trimRows gives back sq's rows from keep on, last first.
func (c *core) trimRows(sq *seq, keep int) {
	for r := sq.rows() - 1; r >= keep; r-- {
		for g := range sq.tables {
			if b := sq.tables[g][r]; b >= 0 {
				c.pool.release(b)
			}
			sq.tables[g] = sq.tables[g][:r]
		}
	}
	for g := range sq.first {
		sq.first[g] = min(sq.first[g], keep)
	}
	sq.registered = min(sq.registered, keep)
}

// releaseBlocks gives sq's blocks back, last row first: the LRU list
// evicts from its front, and a cached prefix is only found from its first
// block on, so the tail must go before the head or one eviction would
// strand the rest of the prefix.
func (c *core) releaseBlocks(sq *seq) {
	c.trimRows(sq, 0)
	sq.registered = 0
	if d := c.cfg.Spec.Drafter; d != nil {
		d.Forget(sq.id) // the draft model's K/V go with the target's
	}
}

// groupKey is the prefix-cache key of group g's block under the chain
// hash h: h itself for group 0 (so a pool of one group keys as without
// groups), mixed with g for the others.
func groupKey(h uint64, g int) uint64 {
	if g == 0 {
		return h
	}
	h ^= uint64(g) * 0x9e3779b97f4a7c15
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// lookupRow finds group g's cached block for full block row i of sq's
// history.
func (c *core) lookupRow(sq *seq, g, i int) (int32, bool) {
	bs := c.cfg.BlockSize
	return c.pool.lookup(groupKey(sq.blockHash(i, bs), g), groupKey(sq.parentHash(i, bs), g), sq.tokens[i*bs:(i+1)*bs])
}

// prefixHits finds the longest cached prefix of sq's history in full block
// rows that every layer group can resume from, never covering the last
// token (its logits must be computed). It returns the rows k and leaves
// each group's blocks in c.hits[g] without taking them.
//
// The rule: k rows are reusable when every group without window has its
// blocks of rows [0, k) cached, and every window group has its blocks of
// rows [FirstRow(window, BlockSize, k*BlockSize), k) cached: the K/V the
// first computed query (at position k*BlockSize) and every later one can
// read. A window group's rows below that are not needed (c.hits[g] holds
// -1 there). The largest such k is taken; a window group that misses a row
// of its window lowers k to that row, so no layer ever reads K/V it does
// not have. An embedding request takes none: the hidden state of every
// token must be computed.
func (c *core) prefixHits(sq *seq) int {
	G := c.groups()
	if len(c.hits) != G {
		c.hits = make([][]int32, G)
	}
	for g := range c.hits {
		c.hits[g] = c.hits[g][:0]
	}
	if c.cfg.DisablePrefixCache || sq.pool != nil {
		return 0
	}
	bs := c.cfg.BlockSize
	k := (len(sq.tokens) - 1) / bs
	// The rows every group without window has, from row 0.
	for i := range k {
		hit := true
		for g := range G {
			if c.window(g) > 0 {
				continue
			}
			b, ok := c.lookupRow(sq, g, i)
			if !ok {
				hit = false
				break
			}
			c.hits[g] = append(c.hits[g], b)
		}
		if !hit {
			k = i
			break
		}
	}
	if c.cfg.KVWindows == nil {
		return k
	}
	// Lower k until every window group has the rows its window reads.
	for k > 0 {
		miss := -1
		for g := range G {
			w := c.window(g)
			if w <= 0 {
				continue
			}
			for i := k - 1; i >= batch.FirstRow(w, bs, k*bs); i-- {
				if _, ok := c.lookupRow(sq, g, i); !ok {
					miss = max(miss, i)
					break
				}
			}
		}
		if miss < 0 {
			break
		}
		k = miss
	}
	for g := range G {
		w := c.window(g)
		if w <= 0 {
			c.hits[g] = c.hits[g][:k]
			continue
		}
		lo := batch.FirstRow(w, bs, k*bs)
		for i := range k {
			b := int32(-1)
			if i >= lo {
				b, _ = c.lookupRow(sq, g, i)
			}
			c.hits[g] = append(c.hits[g], b)
		}
	}
	return k
}

// cachedAmong counts the blocks of c.hits that sit on the LRU list (taking
// them makes them unavailable to alloc).
func (c *core) cachedAmong() int {
	n := 0
	for _, t := range c.hits {
		for _, b := range t {
			if b >= 0 && c.pool.state[b] == blockCached {
				n++
			}
		}
	}
	return n
}

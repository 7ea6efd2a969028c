package batch

import "fmt"

// KVLayout says which layers' K/V a block of a paged pool holds.
//
// Without sliding windows (or when a backend keeps every layer's K/V for
// the whole context) there is one group: a block holds every layer for
// BlockSize positions, and a sequence has one block table
// (SeqStep.Blocks).
//
// With sliding windows the layers are split into groups of Size layers
// that share one window (0: the whole context). Every block of the pool
// has the same size (Size layers) and can serve any group, so the pool
// stays one interchangeable set of blocks; a sequence has one block table
// per group (SeqStep.Tables), and a window group's blocks whose positions
// no later query can see go back to the pool while the sequence runs. Size
// is the greatest common divisor of the number of layers of each window,
// so that no block has an empty slot: for 22 sliding and 4 global layers
// it is 2 (11 window groups and 2 global groups).
type KVLayout struct {
	// Windows[g] is group g's sliding window; 0 for a group whose layers
	// see the whole context. Nil for the one-group layout.
	Windows []int
	// Group[li] and Slot[li] are layer li's group and its place among the
	// group's Size layers.
	Group, Slot []int
	// Size is the number of layers of every group.
	Size int
}

// NewKVLayout lays out the layers whose sliding windows are windows (one
// per layer, 0 for none). With sliding false, or when no layer slides, it
// is the one-group layout (Windows nil, Slot[li] = li). Otherwise the
// layers of each distinct window, in layer order, form groups of Size
// layers; groups are numbered by their first layer.
func NewKVLayout(windows []int, sliding bool) KVLayout {
	n := len(windows)
	l := KVLayout{Group: make([]int, n), Slot: make([]int, n), Size: n}
	slides := false
	for _, w := range windows {
		slides = slides || w > 0
	}
	if !sliding || !slides {
		for li := range l.Slot {
			l.Slot[li] = li
		}
		return l
	}
	count := map[int]int{}
	for _, w := range windows {
		count[max(w, 0)]++
	}
	size := 0
	for _, c := range count {
		size = gcd(size, c)
	}
	l.Size = size
	// open[w] is the group the next layer of window w joins and how many
	// layers it holds.
	type fill struct{ g, n int }
	open := map[int]fill{}
	for li, w := range windows {
		w = max(w, 0)
		f, ok := open[w]
		if !ok || f.n == size {
			f = fill{g: len(l.Windows)}
			l.Windows = append(l.Windows, w)
		}
		l.Group[li], l.Slot[li] = f.g, f.n
		f.n++
		open[w] = f
	}
	return l
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Groups is the number of block tables a sequence has.
func (l KVLayout) Groups() int { return max(len(l.Windows), 1) }

// String names the groups for logs: "1 group of 26 layers" or
// "13 groups of 2 layers (windows [512 512 0 ...])".
func (l KVLayout) String() string {
	if l.Windows == nil {
		return fmt.Sprintf("1 group of %d layers", l.Size)
	}
	return fmt.Sprintf("%d groups of %d layers (windows %v)", len(l.Windows), l.Size, l.Windows)
}

// FirstRow is the first block row (positions [r*blockSize,
// (r+1)*blockSize)) that a group with this window still reads once
// positions [0, next) are computed: the row of next-window+1, the first
// position a query at next sees. Rows below it may go back to the pool.
// It is 0 for a group without window.
func FirstRow(window, blockSize, next int) int {
	if window <= 0 {
		return 0
	}
	return max(0, next-window+1) / blockSize
}

// WindowRows is the most block rows a group with this window holds for a
// sequence that decodes: the rows of positions p-window+1 .. p, which
// span at most ceil((window-1)/blockSize)+1 blocks.
func WindowRows(window, blockSize int) int {
	return (window-1+blockSize-1)/blockSize + 1
}

// SeqBlocks is the most blocks of a pool laid out with group windows
// (KVLayout.Windows; nil: one group of every layer) that one sequence of n
// positions holds while it decodes: ceil(n/blockSize) for every group
// without window, and at most WindowRows for a window group. A prompt
// chunk may hold more for a step (its first tokens see further back); the
// scheduler shrinks chunks to the blocks at hand.
func SeqBlocks(windows []int, blockSize, n int) int {
	rows := (n + blockSize - 1) / blockSize
	if windows == nil {
		return rows
	}
	total := 0
	for _, w := range windows {
		if w > 0 {
			total += min(rows, WindowRows(w, blockSize))
		} else {
			total += rows
		}
	}
	return total
}

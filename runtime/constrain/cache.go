package constrain

import (
	"container/list"
	"maps"
	"slices"
	"strconv"
	"sync"
)

// Format names a constraint by its source; exactly one field is set.
type Format struct {
	JSONSchema string // a JSON Schema, as JSON text
	JSONObject bool   // any JSON object
	Regex      string // an RE2 regular expression matching the whole output
	Grammar    string // a GBNF grammar starting at rule root
	// GrammarSchemas, with Grammar, define some of its rules by JSON
	// Schemas (CompileGBNFSchemas).
	GrammarSchemas map[string]string
	Choice         []string // one of these strings
}

// key identifies f in a cache; different formats have different keys.
func (f Format) key() (string, error) {
	n := 0
	var key string
	if f.JSONSchema != "" {
		n, key = n+1, "s"+f.JSONSchema
	}
	if f.JSONObject {
		n, key = n+1, "o"
	}
	if f.Regex != "" {
		n, key = n+1, "r"+f.Regex
	}
	if f.Grammar != "" {
		// Length-prefixed parts: no two sets of sources share a key.
		k := []byte{'g'}
		for _, part := range append([]string{f.Grammar}, schemaParts(f.GrammarSchemas)...) {
			k = strconv.AppendInt(k, int64(len(part)), 10)
			k = append(k, ':')
			k = append(k, part...)
		}
		n, key = n+1, string(k)
	} else if f.GrammarSchemas != nil {
		return "", invalidf("GrammarSchemas without a Grammar")
	}
	if f.Choice != nil {
		k := []byte{'c'}
		for _, v := range f.Choice {
			k = append(k, v...)
			k = append(k, 0)
		}
		n, key = n+1, string(k)
	}
	switch n {
	case 0:
		return "", invalidf("no format set (or an empty one)")
	case 1:
		return key, nil
	}
	return "", invalidf("more than one format set")
}

// schemaParts are the names and schemas of m, by name.
func schemaParts(m map[string]string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, name, m[name])
	}
	return out
}

// Compile compiles f.
func (f Format) Compile() (*Grammar, error) {
	if _, err := f.key(); err != nil {
		return nil, err
	}
	switch {
	case f.JSONSchema != "":
		return CompileJSONSchema(f.JSONSchema)
	case f.JSONObject:
		return JSONObject(), nil
	case f.Regex != "":
		return CompileRegex(f.Regex)
	case f.Grammar != "":
		return CompileGBNFSchemas(f.Grammar, f.GrammarSchemas)
	}
	return CompileChoice(f.Choice)
}

// Cache compiles formats against one vocabulary and keeps the most
// recently used ones, so a repeated format costs a map lookup and reuses
// its cached masks. It is safe for concurrent use.
type Cache struct {
	vocab  *Vocab
	pieces [][]byte
	size   int

	mu    sync.Mutex
	order *list.List // of *cacheEntry, most recent first
	byKey map[string]*list.Element
}

type cacheEntry struct {
	key string
	c   *Constraint
}

// NewCache returns a cache of at most size constraints over the
// vocabulary of pieces (see NewVocab).
func NewCache(pieces [][]byte, eog []int32, size int) *Cache {
	return &Cache{vocab: NewVocab(pieces, eog), pieces: pieces, size: max(size, 1),
		order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns the constraint of f, compiling it on a miss. Errors wrap
// ErrInvalid.
func (c *Cache) Get(f Format) (*Constraint, error) {
	key, err := f.key()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		con := e.Value.(*cacheEntry).c
		c.mu.Unlock()
		return con, nil
	}
	c.mu.Unlock()
	// Compile outside the lock: compilation is bounded but not free, and
	// other requests should not wait behind it.
	g, err := f.Compile()
	if err != nil {
		return nil, err
	}
	con := NewConstraint(g, c.vocab, c.pieces)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok { // compiled meanwhile by another request
		return e.Value.(*cacheEntry).c, nil
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, c: con})
	if c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cacheEntry).key)
	}
	return con, nil
}

// Len is the number of constraints cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

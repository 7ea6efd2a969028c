package tokenizer

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weft-inference/weft/runtime/gguf"
)

// Errors returned by FromGGUF.
var (
	// ErrUnsupported reports a tokenizer model or pre-tokenizer this package
	// does not implement.
	ErrUnsupported = errors.New("tokenizer: unsupported")
	// ErrInvalid reports tokenizer metadata that is missing or inconsistent.
	ErrInvalid = errors.New("tokenizer: invalid metadata")
)

// Kind is the tokenization algorithm.
type Kind int

const (
	// SPM is SentencePiece-style BPE over characters with byte fallback
	// (tokenizer.ggml.model "llama").
	SPM Kind = iota + 1
	// BPE is byte-level BPE with a pre-tokenizer (tokenizer.ggml.model "gpt2").
	BPE
)

func (k Kind) String() string {
	switch k {
	case SPM:
		return "SPM"
	case BPE:
		return "BPE"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Token attributes, as llama.cpp derives them from tokenizer.ggml.token_type.
type attr uint16

const (
	attrUndefined attr = 0
	attrUnknown   attr = 1 << 0
	attrUnused    attr = 1 << 1
	attrNormal    attr = 1 << 2
	attrControl   attr = 1 << 3
	attrUser      attr = 1 << 4 // user-defined
	attrByte      attr = 1 << 5
	attrLStrip    attr = 1 << 7 // drop whitespace before the token when parsing specials
	attrRStrip    attr = 1 << 8 // drop whitespace after it
)

// GGUF token types (tokenizer.ggml.token_type values).
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// Tokenizer turns text into token ids and back for one vocabulary. It is
// immutable after FromGGUF and safe for concurrent use.
type Tokenizer struct {
	kind   Kind
	pre    string   // tokenizer.ggml.pre as given ("" when absent)
	tokens []string // vocabulary text by id
	scores []float32
	attrs  []attr
	ids    map[string]int32 // text -> id (the last id wins for duplicates)

	bos, eos, eot, eom, unk, pad int32 // -1 when none
	eog                          map[int32]bool

	addBOS, addEOS, addSpacePrefix bool
	ignoreMerges                   bool

	// special lists the tokens recognised in raw text (control, user-defined
	// and unknown), longest text first.
	special []int32
	trie    *trieNode // over the texts of special, to find candidates fast

	pieces [][]byte // TokenBytes by id

	// SPM
	byteTokens [256]int32 // id of "<0xXX>" (or of the one-byte text), -1 if none

	// BPE
	rules  *ruleSet
	merges map[string][]mergeSplit // left+right -> possible splits with ranks
	// spmStyle marks a BPE vocabulary over SentencePiece-style text
	// (tokenizer.ggml.model "gemma4"): spaces become "▁" before the split,
	// merges run on the raw UTF-8 (no GPT-2 byte alphabet), a symbol that
	// is not a token falls back to "<0xAB>" tokens (byteTokens), and a
	// word made only of newlines is taken whole when it is a token.
	spmStyle bool
}

type mergeSplit struct {
	leftLen int32
	rank    int32
}

// Metadata keys.
const (
	keyModel       = "tokenizer.ggml.model"
	keyPre         = "tokenizer.ggml.pre"
	keyTokens      = "tokenizer.ggml.tokens"
	keyScores      = "tokenizer.ggml.scores"
	keyTokenType   = "tokenizer.ggml.token_type"
	keyMerges      = "tokenizer.ggml.merges"
	keyAddBOS      = "tokenizer.ggml.add_bos_token"
	keyAddEOS      = "tokenizer.ggml.add_eos_token"
	keyAddPrefix   = "tokenizer.ggml.add_space_prefix"
	keyGeneralName = "general.name"
)

// FromGGUF builds the tokenizer described by f's tokenizer.ggml.* metadata,
// with llama.cpp's defaults for whatever is absent.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, ok := f.String(keyModel)
	if !ok {
		return nil, fmt.Errorf("%w: %s missing", ErrInvalid, keyModel)
	}
	t := &Tokenizer{bos: -1, eos: -1, eot: -1, eom: -1, unk: -1, pad: -1}
	t.pre, _ = f.String(keyPre)
	switch model {
	case "llama":
		t.kind = SPM
		t.bos, t.eos, t.unk = 1, 2, 0
		t.addSpacePrefix, t.addBOS = true, true
	case "gemma4":
		// Byte-level BPE's merge algorithm over SentencePiece-style text;
		// no default special ids (the file gives them), the pre-tokenizer
		// is always Gemma 4's whatever tokenizer.ggml.pre says, and BOS is
		// always added (llama.cpp overrides add_bos_token=false for it).
		t.kind = BPE
		t.spmStyle = true
		t.rules = ruleSets["gemma4"]
	case "gpt2":
		t.kind = BPE
		t.bos, t.eos = 11, 11
		rs, err := lookupRuleSet(t.pre)
		if err != nil {
			return nil, err
		}
		t.rules = rs
		switch t.pre {
		case "llama3", "llama-v3", "llama-bpe", "falcon3", "tekken":
			t.ignoreMerges, t.addBOS = true, true
		case "chatglm-bpe":
			t.bos = -1
		}
	default:
		return nil, fmt.Errorf("%w: tokenizer model %q (supported: \"llama\" SentencePiece, \"gpt2\" byte-level BPE, \"gemma4\" SentencePiece-style BPE)", ErrUnsupported, model)
	}
	if v, ok := f.Bool(keyAddPrefix); ok {
		t.addSpacePrefix = v
	}

	tokens, ok := f.Strings(keyTokens)
	if !ok || len(tokens) == 0 {
		return nil, fmt.Errorf("%w: %s missing or empty", ErrInvalid, keyTokens)
	}
	if len(tokens) > 1<<31-1 {
		return nil, fmt.Errorf("%w: %d tokens", ErrInvalid, len(tokens))
	}
	n := len(tokens)
	t.tokens = make([]string, n)
	t.ids = make(map[string]int32, n)
	for i, s := range tokens {
		if s == "" {
			s = fmt.Sprintf("[EMPTY_%d]", i)
		}
		t.tokens[i] = s
		t.ids[s] = int32(i)
	}
	t.scores = make([]float32, n)
	if sc, ok := f.Float32s(keyScores); ok {
		if len(sc) != n {
			return nil, fmt.Errorf("%w: %d scores for %d tokens", ErrInvalid, len(sc), n)
		}
		copy(t.scores, sc)
	}
	t.attrs = make([]attr, n)
	types, hasTypes := f.Int32s(keyTokenType)
	if hasTypes && len(types) != n {
		return nil, fmt.Errorf("%w: %d token types for %d tokens", ErrInvalid, len(types), n)
	}
	for i := range t.attrs {
		if !hasTypes {
			t.attrs[i] = attrNormal
			continue
		}
		switch types[i] {
		case typeNormal:
			t.attrs[i] = attrNormal
		case typeUnknown:
			t.attrs[i] = attrUnknown
		case typeControl:
			t.attrs[i] = attrControl
		case typeUserDefined:
			t.attrs[i] = attrUser
		case typeUnused:
			t.attrs[i] = attrUnused
		case typeByte:
			t.attrs[i] = attrByte
		default:
			t.attrs[i] = attrUndefined
		}
	}
	for _, id := range []*int32{&t.bos, &t.eos, &t.unk} {
		if *id >= int32(n) {
			*id = -1 // a default that this vocabulary is too small for
		}
	}

	if t.kind == BPE {
		if err := t.loadMerges(f); err != nil {
			return nil, err
		}
	}
	if t.kind == SPM || t.spmStyle {
		t.loadByteTokens()
	}

	// Special token ids from the metadata; out-of-range values keep the default.
	fimPre, fimSuf, fimMid, fimPad, fimRep, fimSep := int32(-1), int32(-1), int32(-1), int32(-1), int32(-1), int32(-1)
	sep, mask := int32(-1), int32(-1)
	for _, k := range []struct {
		key string
		id  *int32
	}{
		{"tokenizer.ggml.bos_token_id", &t.bos},
		{"tokenizer.ggml.eos_token_id", &t.eos},
		{"tokenizer.ggml.eot_token_id", &t.eot},
		{"tokenizer.ggml.eom_token_id", &t.eom},
		{"tokenizer.ggml.unknown_token_id", &t.unk},
		{"tokenizer.ggml.seperator_token_id", &sep},
		{"tokenizer.ggml.padding_token_id", &t.pad},
		{"tokenizer.ggml.mask_token_id", &mask},
		{"tokenizer.ggml.fim_pre_token_id", &fimPre},
		{"tokenizer.ggml.fim_suf_token_id", &fimSuf},
		{"tokenizer.ggml.fim_mid_token_id", &fimMid},
		{"tokenizer.ggml.fim_pad_token_id", &fimPad},
		{"tokenizer.ggml.fim_rep_token_id", &fimRep},
		{"tokenizer.ggml.fim_sep_token_id", &fimSep},
		{"tokenizer.ggml.prefix_token_id", &fimPre},
		{"tokenizer.ggml.suffix_token_id", &fimSuf},
		{"tokenizer.ggml.middle_token_id", &fimMid},
	} {
		if v, ok := f.Uint(k.key); ok && v < uint64(n) {
			*k.id = int32(v)
		}
	}
	if v, ok := f.Bool(keyAddBOS); ok {
		t.addBOS = v
	}
	if t.spmStyle {
		t.addBOS = true
	}
	if v, ok := f.Bool(keyAddEOS); ok {
		t.addEOS = v
	}

	// Control-looking tokens found by their text, as llama.cpp does: they
	// become control tokens and some of them end generation.
	byText := func(texts ...string) int32 {
		for _, s := range texts {
			if id, ok := t.ids[s]; ok {
				return id
			}
		}
		return -1
	}
	detect := func(id *int32, texts ...string) {
		if *id >= 0 {
			return
		}
		if *id = byText(texts...); *id >= 0 {
			t.attrs[*id] |= attrControl
		}
	}
	detect(&t.eot, "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>")
	detect(&t.eom, "<|eom_id|>")
	detect(&fimPre, "<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>")
	detect(&fimSuf, "<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>")
	detect(&fimMid, "<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>")
	detect(&fimPad, "<|fim_pad|>", "<fim-pad>", "<PAD>")
	detect(&fimRep, "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>")
	detect(&fimSep, "<|file_sep|>")

	t.eog = map[int32]bool{}
	for _, id := range []int32{fimPad, fimRep, fimSep, t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, s := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "<|end_of_text|>",
		"<eos>", "<turn|>", "<|tool_response>"} {
		if id, ok := t.ids[s]; ok {
			t.eog[id] = true
			t.attrs[id] |= attrControl
		}
	}

	// Tokens recognised in raw text, longest first (ties by id, for a
	// deterministic order).
	for id, a := range t.attrs {
		if a&(attrControl|attrUser|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	slices.SortStableFunc(t.special, func(a, b int32) int {
		return cmp.Compare(len(t.tokens[b]), len(t.tokens[a]))
	})

	// Per-model strip attributes (llama.cpp sets them by name).
	name, _ := f.String(keyGeneralName)
	name = strings.ToLower(name)
	setAttr := func(text string, a attr, on bool) {
		if id, ok := t.ids[text]; ok {
			if on {
				t.attrs[id] |= a
			} else {
				t.attrs[id] &^= a
			}
		}
	}
	switch {
	case strings.Contains(t.pre, "jina-v2-de") || strings.Contains(t.pre, "jina-v2-es") || strings.Contains(t.pre, "jina-v2-code"):
		setAttr("<mask>", attrLStrip, true)
	case strings.Contains(name, "phi-3") || strings.Contains(name, "phi3"):
		for _, id := range t.special {
			t.attrs[id] |= attrRStrip
		}
		setAttr("</s>", attrRStrip, true)
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			setAttr(s, attrRStrip, false)
		}
	}

	t.trie = &trieNode{}
	for _, id := range t.special {
		t.trie.insert(t.tokens[id], id)
	}

	t.pieces = make([][]byte, n)
	for id := range t.pieces {
		t.pieces[id] = t.computePiece(int32(id))
	}
	return t, nil
}

func (t *Tokenizer) loadMerges(f *gguf.File) error {
	merges, ok := f.Strings(keyMerges)
	if !ok {
		return fmt.Errorf("%w: %s missing (required by byte-level BPE)", ErrInvalid, keyMerges)
	}
	t.merges = make(map[string][]mergeSplit, len(merges))
	for rank, m := range merges {
		// Split at the first space after the first byte, as llama.cpp does.
		p := -1
		if len(m) > 1 {
			if q := strings.IndexByte(m[1:], ' '); q >= 0 {
				p = q + 1
			}
		}
		var left, right string
		if p >= 0 {
			left, right = m[:p], m[p+1:]
		}
		key := left + right
		ms := t.merges[key]
		dup := false
		for _, s := range ms {
			if s.leftLen == int32(len(left)) {
				dup = true // the first (lowest) rank of a pair wins
				break
			}
		}
		if !dup {
			t.merges[key] = append(ms, mergeSplit{int32(len(left)), int32(rank)})
		}
	}
	return nil
}

func (t *Tokenizer) loadByteTokens() {
	const hex = "0123456789ABCDEF"
	for b := range 256 {
		t.byteTokens[b] = -1
		name := string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})
		if id, ok := t.ids[name]; ok {
			t.byteTokens[b] = id
		} else if id, ok := t.ids[string([]byte{byte(b)})]; ok && t.kind == SPM {
			t.byteTokens[b] = id
		}
	}
}

// Kind returns the tokenization algorithm.
func (t *Tokenizer) Kind() Kind { return t.kind }

// Pre returns tokenizer.ggml.pre as found in the file ("" when absent).
func (t *Tokenizer) Pre() string { return t.pre }

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS returns the beginning-of-sequence id, or -1.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence id, or -1.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT returns the end-of-turn id (e.g. <|eot_id|>, <|im_end|>), or -1.
func (t *Tokenizer) EOT() int32 { return t.eot }

// UNK returns the unknown-token id, or -1.
func (t *Tokenizer) UNK() int32 { return t.unk }

// PAD returns the padding id, or -1.
func (t *Tokenizer) PAD() int32 { return t.pad }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS && t.bos >= 0 }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS && t.eos >= 0 }

// IsEOG reports whether id ends generation: EOS, EOT, EOM, the FIM
// pad/repo/file-separator tokens, and tokens whose text is one of
// <|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, <|eom_id|>,
// <EOT>, <|end_of_text|>, and Gemma 4's <eos>, <turn|>, <|tool_response>.
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// EOGs returns the end-of-generation ids in increasing order.
func (t *Tokenizer) EOGs() []int32 {
	out := make([]int32, 0, len(t.eog))
	for id := range t.eog {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.tokens) }

// IsControl reports whether id is a control token (BOS, EOS, <|eot_id|>...):
// one that renders as nothing.
func (t *Tokenizer) IsControl(id int32) bool { return t.valid(id) && t.attrs[id]&attrControl != 0 }

// Piece returns the raw vocabulary text of id ("" when out of range).
func (t *Tokenizer) Piece(id int32) string {
	if !t.valid(id) {
		return ""
	}
	return t.tokens[id]
}

// ID returns the id whose vocabulary text is s.
func (t *Tokenizer) ID(s string) (int32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

// trieNode is a byte trie over the special token texts.
type trieNode struct {
	next map[byte]*trieNode
	id   int32 // token ending here, or -1 (with end false)
	end  bool
}

func (n *trieNode) insert(s string, id int32) {
	for i := 0; i < len(s); i++ {
		if n.next == nil {
			n.next = map[byte]*trieNode{}
		}
		c, ok := n.next[s[i]]
		if !ok {
			c = &trieNode{}
			n.next[s[i]] = c
		}
		n = c
	}
	n.end, n.id = true, id
}

package tokenizer

import "fmt"

// Pre-tokenization splits a text fragment into words before byte-level BPE
// runs on each word separately. The reference rules are regular expressions
// (from the models' tokenizer.json, as adapted by llama.cpp) that use Unicode
// categories and look-aheads, which Go's regexp cannot express, so each is
// written here as a scanner over runes.
//
// A rule set is a list of passes applied one after the other. A pass looks
// at every piece produced so far on its own (its matches and look-aheads
// never see past the piece) and cuts it into the pieces its expression
// matches, scanning left to right for leftmost non-overlapping matches; the
// text between two matches (a "gap") also becomes a piece. This is how
// llama.cpp applies a list of expressions, and with a single pass it is
// the usual "find all matches" of Hugging Face tokenizers, whose patterns
// always match every character.

type span struct{ start, end int } // rune indexes, end exclusive

// pass refines the piece [s, e) of t, appending the resulting pieces to out.
type pass func(t *runeText, s, e int, out []span) []span

// matcher returns the end of a match of one expression at position i of the
// piece ending at e, or -1 when it does not match there.
type matcher func(t *runeText, i, e int) int

// findAll makes a pass out of an expression: its matches and the gaps
// between them become pieces.
func findAll(m matcher) pass {
	return func(t *runeText, s, e int, out []span) []span {
		gap := s
		for i := s; i < e; {
			j := m(t, i, e)
			if j <= i {
				i++
				continue
			}
			if gap < i {
				out = append(out, span{gap, i})
			}
			out = append(out, span{i, j})
			i, gap = j, j
		}
		if gap < e {
			out = append(out, span{gap, e})
		}
		return out
	}
}

// ruleSet is a named list of passes.
type ruleSet struct {
	name   string
	passes []pass
}

// split pre-tokenizes text and returns the pieces as byte ranges of text.
func (rs *ruleSet) split(t *runeText) []span {
	cur := []span{{0, len(t.r)}}
	if len(t.r) == 0 {
		return nil
	}
	var next []span
	for _, p := range rs.passes {
		next = next[:0]
		for _, sp := range cur {
			next = p(t, sp.start, sp.end, next)
		}
		cur, next = next, cur
	}
	return cur
}

// --- expressions -----------------------------------------------------------

// gpt2Match is GPT-2's expression
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// It matches at every position. The contractions are case-sensitive and the
// optional prefix is the ASCII space only.
func gpt2Match(t *runeText, i, e int) int {
	r := t.r[i]
	if r == '\'' && i+1 < e {
		switch t.r[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		}
		if i+2 < e {
			a, b := t.r[i+1], t.r[i+2]
			if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
				return i + 3
			}
		}
	}
	p := i
	if r == ' ' {
		p = i + 1
	}
	if p < e {
		switch {
		case t.is(p, clsLetter):
			return runOf(t, p+1, e, clsLetter)
		case t.is(p, clsNumber):
			return runOf(t, p+1, e, clsNumber)
		case !t.is(p, clsLetter|clsNumber|clsSpace):
			return runNot(t, p+1, e, clsLetter|clsNumber|clsSpace)
		}
	}
	return spaceMatch(t, i, e, false)
}

// llama3Match is Llama 3's expression (maxDigits 3, letters \p{L}), Qwen2's
// (maxDigits 1) and Qwen3.5's (maxDigits 1, letters [\p{L}\p{M}]: a run of
// letters also takes combining marks):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?LETTERS+|\p{N}{1,3}|
//	 ?[^\s\p{N}LETTERS]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func llama3Match(maxDigits int, letters uint8) matcher {
	return func(t *runeText, i, e int) int {
		r := t.r[i]
		if r == '\'' && i+1 < e {
			switch lowerASCII(t.r[i+1]) {
			case 's', 't', 'm', 'd':
				return i + 2
			}
			if i+2 < e {
				a, b := lowerASCII(t.r[i+1]), lowerASCII(t.r[i+2])
				if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
					return i + 3
				}
			}
		}
		// [^\r\n\p{L}\p{N}]?LETTERS+ (the optional prefix is never a
		// letter, so a LETTERS rune at i starts the run itself)
		if r != '\r' && r != '\n' && !t.is(i, clsNumber) {
			if t.is(i, letters) || (i+1 < e && t.is(i+1, letters)) {
				return runOf(t, i+1, e, letters)
			}
		}
		// \p{N}{1,maxDigits}
		if t.is(i, clsNumber) {
			j := i + 1
			for j < e && j-i < maxDigits && t.is(j, clsNumber) {
				j++
			}
			return j
		}
		// ' ?[^\s\p{N}LETTERS]+[\r\n]*'
		p := i
		if r == ' ' {
			p = i + 1
		}
		if p < e && !t.is(p, letters|clsNumber|clsSpace) {
			j := runNot(t, p+1, e, letters|clsNumber|clsSpace)
			for j < e && (t.r[j] == '\r' || t.r[j] == '\n') {
				j++
			}
			return j
		}
		return spaceMatch(t, i, e, true)
	}
}

// spaceMatch handles the whitespace alternatives at i: with crlf,
// \s*[\r\n]+ first (up to and including the last CR or LF of the run); then
// \s+(?!\S) (the run, less its last character when a non-space follows
// inside the piece) and \s+. When i is not whitespace it returns i+1, the
// fallback of a character nothing matches (unreachable for these rules).
func spaceMatch(t *runeText, i, e int, crlf bool) int {
	j, lastNL := i, -1
	for j < e && t.is(j, clsSpace) {
		if crlf && (t.r[j] == '\r' || t.r[j] == '\n') {
			lastNL = j + 1
		}
		j++
	}
	n := j - i
	switch {
	case lastNL > 0:
		return lastNL
	case n > 1 && j < e:
		return j - 1
	case n > 0:
		return j
	}
	return i + 1
}

func lowerASCII(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// runOf returns the end of the run of runes having class c from j.
func runOf(t *runeText, j, e int, c uint8) int {
	for j < e && t.cls[j]&c != 0 {
		j++
	}
	return j
}

// runNot returns the end of the run of runes having none of the classes c.
func runNot(t *runeText, j, e int, c uint8) int {
	for j < e && t.cls[j]&c == 0 {
		j++
	}
	return j
}

// plus is X+ for a one-character predicate X.
func plus(x func(t *runeText, i int) bool) matcher {
	return func(t *runeText, i, e int) int {
		if !x(t, i) {
			return -1
		}
		j := i + 1
		for j < e && x(t, j) {
			j++
		}
		return j
	}
}

// one is X for a one-character predicate X.
func one(x func(t *runeText, i int) bool) matcher {
	return func(t *runeText, i, e int) int {
		if x(t, i) {
			return i + 1
		}
		return -1
	}
}

// optSpacePlus is \s?X+ (X never matches whitespace).
func optSpacePlus(x func(t *runeText, i int) bool) matcher {
	xs := plus(x)
	return func(t *runeText, i, e int) int {
		if t.is(i, clsSpace) && i+1 < e {
			if j := xs(t, i+1, e); j > 0 {
				return j
			}
		}
		return xs(t, i, e)
	}
}

// trailingSpace is the pass for \s+$: the whitespace run that ends the piece
// (if any) is split off. Written as a pass, not a matcher, to stay linear.
func trailingSpace(t *runeText, s, e int, out []span) []span {
	j := e
	for j > s && t.is(j-1, clsSpace) {
		j--
	}
	if j > s {
		out = append(out, span{s, j})
	}
	if j < e {
		out = append(out, span{j, e})
	}
	return out
}

func isClass(c uint8) func(t *runeText, i int) bool {
	return func(t *runeText, i int) bool { return t.cls[i]&c != 0 }
}

func inRanges(c rangeClass) func(t *runeText, i int) bool {
	return func(t *runeText, i int) bool { return c.has(t.regexRune(i)) }
}

func notInRanges(c rangeClass) func(t *runeText, i int) bool {
	return func(t *runeText, i int) bool {
		return !t.is(i, clsSpace) && !c.has(t.regexRune(i))
	}
}

func isCRLF(t *runeText, i int) bool { return t.r[i] == '\r' || t.r[i] == '\n' }

func isASCIIDigit(t *runeText, i int) bool { return '0' <= t.r[i] && t.r[i] <= '9' }

// threeDigits is [0-9][0-9][0-9].
func threeDigits(t *runeText, i, e int) int {
	if i+3 <= e && isASCIIDigit(t, i) && isASCIIDigit(t, i+1) && isASCIIDigit(t, i+2) {
		return i + 3
	}
	return -1
}

// punctOrASCIISymbols is [\p{P}$+<=>^~|] plus, with backtick, "`".
func punctOr(extra string) func(t *runeText, i int) bool {
	return func(t *runeText, i int) bool {
		if t.is(i, clsPunct) {
			return true
		}
		r := t.r[i]
		for _, x := range extra {
			if r == x {
				return true
			}
		}
		return false
	}
}

// deepseekLetters is the letter class of DeepSeek LLM's second expression
// (cased letters, roughly \p{Lu}\p{Ll}\p{Lt}), as code point ranges: written
// out in hex because several of its characters (U+1F7D, U+1FBE, U+1FD3,
// U+1FDB, U+2126, U+212A) have canonical singleton decompositions and would
// silently change under Unicode normalization of the source.
var deepseekLetters = rangeClass{
	{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
	{0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x376}, {0x377, 0x377},
	{0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1},
	{0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5},
	{0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B},
	{0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45},
	{0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
	{0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4},
	{0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4},
	{0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115},
	{0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D},
	{0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E},
	{0x2183, 0x2183}, {0x2184, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
	{0x2CF2, 0x2CF2}, {0x2CF3, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
	{0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
	{0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
	{0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}

// Character ranges of the DeepSeek and BLOOM rules, verbatim from their
// tokenizer.json expressions.
var (
	deepseekPunct = parseClass("!-/:-~！-／：-～‘-‟　-。")
	deepseekCJK   = parseClass("一-龥ࠀ-一가-퟿")
	bloomStop     = parseClass("(|.,!?…。，、।۔،)")
)

// bloomWord is ' ?[^(\s|.,!?…。，、।۔،)]+'.
func bloomWord(t *runeText, i, e int) int {
	x := notInRanges(bloomStop)
	p := i
	if t.r[i] == ' ' && i+1 < e && x(t, i+1) {
		p = i + 1
	}
	if !x(t, p) {
		return -1
	}
	j := p + 1
	for j < e && x(t, j) {
		j++
	}
	return j
}

// deepseekV3Match is the third expression of DeepSeek V3's rules:
//
//	[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//	 ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func deepseekV3Match(t *runeText, i, e int) int {
	r := t.r[i]
	if isASCIIPunctSym(r) && i+1 < e && isASCIILetter(t.r[i+1]) {
		j := i + 2
		for j < e && isASCIILetter(t.r[j]) {
			j++
		}
		return j
	}
	if r != '\r' && r != '\n' && !t.is(i, clsLetter|clsPunct|clsSymbol) && i+1 < e && t.is(i+1, clsLetter|clsMark) {
		return runOf(t, i+2, e, clsLetter|clsMark)
	}
	if t.is(i, clsLetter|clsMark) {
		return runOf(t, i+1, e, clsLetter|clsMark)
	}
	p := i
	if r == ' ' {
		p = i + 1
	}
	if p < e && t.is(p, clsPunct|clsSymbol) {
		j := runOf(t, p+1, e, clsPunct|clsSymbol)
		for j < e && (t.r[j] == '\r' || t.r[j] == '\n') {
			j++
		}
		return j
	}
	if t.is(i, clsSpace) {
		return spaceMatch(t, i, e, true)
	}
	return -1
}

// tekkenMatch is Mistral's Tekken expression as llama.cpp adapts it (case
// is told apart for ASCII letters only: an "upper" letter is any letter but
// a-z, a "lower" one any letter but A-Z):
//
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|
//	\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func tekkenMatch(t *runeText, i, e int) int {
	upper := func(j int) bool { return t.is(j, clsLetter) && !('a' <= t.r[j] && t.r[j] <= 'z') }
	lower := func(j int) bool { return t.is(j, clsLetter) && !('A' <= t.r[j] && t.r[j] <= 'Z') }
	r := t.r[i]
	p := i
	if r != '\r' && r != '\n' && !t.is(i, clsLetter|clsNumber) && i+1 < e {
		p = i + 1 // the optional prefix; without it nothing below matches at i
	}
	// upper* lower+: the upper run backs off until a lower letter follows.
	u := p
	for u < e && upper(u) {
		u++
	}
	for k := u; k >= p; k-- {
		if k < e && lower(k) {
			j := k + 1
			for j < e && lower(j) {
				j++
			}
			return j
		}
	}
	// upper+ lower* (lower* is empty here, or the loop above had matched).
	if u > p {
		return u
	}
	if t.is(i, clsNumber) {
		return i + 1
	}
	q := i
	if r == ' ' {
		q = i + 1
	}
	if q < e && !t.is(q, clsLetter|clsNumber|clsSpace) {
		j := runNot(t, q+1, e, clsLetter|clsNumber|clsSpace)
		for j < e && (t.r[j] == '\r' || t.r[j] == '\n' || t.r[j] == '/') {
			j++
		}
		return j
	}
	return spaceMatch(t, i, e, true)
}

// newlineRuns is [^\n]+|[\n]+: the text is cut where it changes between
// newlines and anything else (Gemma 4's only split: its BPE runs over whole
// lines, spaces included).
func newlineRuns(t *runeText, i, e int) int {
	nl := t.r[i] == '\n'
	j := i + 1
	for j < e && (t.r[j] == '\n') == nl {
		j++
	}
	return j
}

func isASCIILetter(r rune) bool { return ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') }

// isASCIIPunctSym is [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~].
func isASCIIPunctSym(r rune) bool {
	return (r >= '!' && r <= '/') || (r >= ':' && r <= '@') || (r >= '[' && r <= '`') || (r >= '{' && r <= '~')
}

// upToThreeNumbers is \p{N}{1,3}.
func upToThreeNumbers(t *runeText, i, e int) int {
	if !t.is(i, clsNumber) {
		return -1
	}
	j := i + 1
	for j < e && j-i < 3 && t.is(j, clsNumber) {
		j++
	}
	return j
}

var deepseekV3CJK = parseClass("一-龥぀-ゟ゠-ヿ")

var (
	passGPT2   = findAll(gpt2Match)
	passLlama3 = findAll(llama3Match(3, clsLetter))
	passQwen2  = findAll(llama3Match(1, clsLetter))
	passQwen35 = findAll(llama3Match(1, clsLetter|clsMark))
	passDigit  = findAll(one(isClass(clsNumber)))
)

// ruleSets maps tokenizer.ggml.pre values to their pre-tokenizer rules.
var ruleSets = func() map[string]*ruleSet {
	gpt2 := &ruleSet{"gpt-2", []pass{passGPT2}}
	llama3 := &ruleSet{"llama3", []pass{passLlama3}}
	qwen2 := &ruleSet{"qwen2", []pass{passQwen2}}
	qwen35 := &ruleSet{"qwen35", []pass{passQwen35}}
	gemma4 := &ruleSet{"gemma4", []pass{findAll(newlineRuns)}}
	starcoder := &ruleSet{"starcoder", []pass{passDigit, passGPT2}}
	def := &ruleSet{"default", []pass{
		findAll(plus(punctOr("$+<=>^~|"))),
		passGPT2,
		findAll(plus(isClass(clsNumber))),
		findAll(threeDigits),
	}}
	falcon := &ruleSet{"falcon", []pass{
		findAll(plus(punctOr("$+<=>^~|`"))),
		passGPT2,
		findAll(threeDigits),
	}}
	deepseekLLM := &ruleSet{"deepseek-llm", []pass{
		findAll(one(isCRLF)),
		findAll(optSpacePlus(inRanges(deepseekLetters))),
		findAll(optSpacePlus(inRanges(deepseekPunct))),
		trailingSpace,
		findAll(plus(inRanges(deepseekCJK))),
		findAll(plus(isClass(clsNumber))),
	}}
	deepseekCoder := &ruleSet{"deepseek-coder", []pass{
		findAll(one(isCRLF)),
		findAll(optSpacePlus(isClass(clsLetter))),
		findAll(optSpacePlus(isClass(clsPunct))),
		findAll(plus(inRanges(deepseekCJK))),
		passDigit,
	}}
	deepseekV3 := &ruleSet{"deepseek-v3", []pass{
		findAll(upToThreeNumbers),
		findAll(plus(inRanges(deepseekV3CJK))),
		findAll(deepseekV3Match),
	}}
	tekken := &ruleSet{"tekken", []pass{findAll(tekkenMatch)}}
	bloom := &ruleSet{"bloom", []pass{findAll(bloomWord)}}
	viking := &ruleSet{"viking", []pass{findAll(bloomWord), passDigit}}

	m := map[string]*ruleSet{
		"default":        def,
		"llama3":         llama3,
		"llama-v3":       llama3,
		"llama-bpe":      llama3,
		"falcon3":        llama3,
		"dbrx":           llama3,
		"smaug-bpe":      llama3,
		"chatglm-bpe":    llama3,
		"deepseek-llm":   deepseekLLM,
		"deepseek-coder": deepseekCoder,
		"deepseek-v3":    deepseekV3,
		"tekken":         tekken,
		"falcon":         falcon,
		"starcoder":      starcoder,
		"refact":         starcoder,
		"command-r":      starcoder,
		"smollm":         starcoder,
		"codeshell":      starcoder,
		"exaone":         starcoder,
		"minerva-7b":     starcoder,
		"qwen2":          qwen2,
		"stablelm2":      qwen2,
		"megrez":         qwen2,
		"qwen35":         qwen35,
		"gemma4":         gemma4,
		"poro-chat":      bloom,
		"bloom":          bloom,
		"gpt3-finnish":   bloom,
		"viking":         viking,
	}
	for _, n := range []string{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en",
		"jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais"} {
		m[n] = gpt2
	}
	return m
}()

func lookupRuleSet(pre string) (*ruleSet, error) {
	if pre == "" {
		pre = "default"
	}
	rs, ok := ruleSets[pre]
	if !ok {
		return nil, fmt.Errorf("%w: pre-tokenizer %q", ErrUnsupported, pre)
	}
	return rs, nil
}

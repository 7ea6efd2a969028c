package constrain

import (
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// CompileRegex compiles an RE2 regular expression (Go's regexp syntax) that
// the whole output must match: anchors are implied, and ^ or $ at the ends
// are accepted and change nothing. Line anchors, word boundaries and
// other zero-width assertions are refused.
func CompileRegex(expr string) (*Grammar, error) {
	if len(expr) > MaxSourceBytes {
		return nil, tooLargef("regex of %d bytes, at most %d", len(expr), MaxSourceBytes)
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, invalidf("regex: %v", err)
	}
	b := &builder{}
	seq, err := b.regex(trimAnchors(re), false, 0)
	if err != nil {
		return nil, err
	}
	return b.finish(seq)
}

// trimAnchors drops a leading \A (^) and a trailing \z ($) of re.
func trimAnchors(re *syntax.Regexp) *syntax.Regexp {
	re, _, _ = anchors(re)
	return re
}

// anchors reports whether re starts with ^ (begin of text) and ends with $
// (end of text), and returns re without them.
func anchors(re *syntax.Regexp) (*syntax.Regexp, bool, bool) {
	switch re.Op {
	case syntax.OpBeginText:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch}, true, false
	case syntax.OpEndText:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch}, false, true
	case syntax.OpConcat:
		subs := re.Sub
		begin, end := false, false
		if len(subs) > 0 && subs[0].Op == syntax.OpBeginText {
			subs, begin = subs[1:], true
		}
		if len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText {
			subs, end = subs[:len(subs)-1], true
		}
		c := *re
		c.Sub = subs
		return &c, begin, end
	}
	return re, false, false
}

// regex turns a parsed regular expression into a sequence. With jsonStr
// the sequence produces the text inside a JSON string: a literal quote or
// backslash is written escaped, and character classes leave out the
// characters that would need escaping (quote, backslash, control
// characters), so the output is always a valid JSON string whose value
// matches.
func (b *builder) regex(re *syntax.Regexp, jsonStr bool, depth int) ([]item, error) {
	if depth > MaxNesting {
		return nil, tooLargef("regex nested deeper than %d", MaxNesting)
	}
	if b.err != nil {
		return nil, b.err
	}
	fold := re.Flags&syntax.FoldCase != 0
	switch re.Op {
	case syntax.OpNoMatch:
		return []item{byteItem(byteSet{})}, nil
	case syntax.OpEmptyMatch:
		return nil, nil
	case syntax.OpLiteral:
		var out []item
		for _, r := range re.Rune {
			if fold && unicode.SimpleFold(r) != r {
				var rs []rune
				for f := r; ; {
					rs = append(rs, f, f)
					if f = unicode.SimpleFold(f); f == r {
						break
					}
				}
				out = append(out, b.classSeq(sortRanges(rs), jsonStr)...)
				continue
			}
			out = append(out, b.literalRune(r, jsonStr)...)
		}
		return out, nil
	case syntax.OpCharClass:
		return b.classSeq(re.Rune, jsonStr), nil
	case syntax.OpAnyCharNotNL:
		return b.classSeq([]rune{0, '\n' - 1, '\n' + 1, utf8.MaxRune}, jsonStr), nil
	case syntax.OpAnyChar:
		return b.classSeq([]rune{0, utf8.MaxRune}, jsonStr), nil
	case syntax.OpCapture:
		return b.regex(re.Sub[0], jsonStr, depth+1)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		sub, err := b.regex(re.Sub[0], jsonStr, depth+1)
		if err != nil {
			return nil, err
		}
		switch re.Op {
		case syntax.OpStar:
			return b.star(sub), nil
		case syntax.OpPlus:
			return b.repeat(sub, 1, -1), nil
		}
		return b.opt(sub), nil
	case syntax.OpRepeat:
		sub, err := b.regex(re.Sub[0], jsonStr, depth+1)
		if err != nil {
			return nil, err
		}
		return b.repeat(sub, re.Min, re.Max), b.err
	case syntax.OpConcat:
		var out []item
		for _, s := range re.Sub {
			seq, err := b.regex(s, jsonStr, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, seq...)
		}
		return out, nil
	case syntax.OpAlternate:
		alts := make([][]item, len(re.Sub))
		for i, s := range re.Sub {
			seq, err := b.regex(s, jsonStr, depth+1)
			if err != nil {
				return nil, err
			}
			alts[i] = seq
		}
		return b.rule(alts...), nil
	}
	return nil, invalidf("regex: %s is not supported (only ^ and $ at the ends)", opName(re))
}

func opName(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine:
		return "a line anchor (multi-line mode)"
	case syntax.OpBeginText:
		return "^ inside the expression"
	case syntax.OpEndText:
		return "$ inside the expression"
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return `a word boundary (\b, \B)`
	}
	return re.Op.String()
}

func (b *builder) literalRune(r rune, jsonStr bool) []item {
	if jsonStr {
		switch {
		case r == '"':
			return lit(`\"`)
		case r == '\\':
			return lit(`\\`)
		case r < 0x20:
			return lit(jsonEscape(r))
		}
	}
	if r < 0 || r > utf8.MaxRune || (r >= 0xD800 && r <= 0xDFFF) {
		r = utf8.RuneError
	}
	return lit(string(r))
}

func jsonEscape(r rune) string {
	const hex = "0123456789abcdef"
	switch r {
	case '\n':
		return `\n`
	case '\t':
		return `\t`
	case '\r':
		return `\r`
	}
	return `\u00` + string(hex[r>>4]) + string(hex[r&15])
}

// classSeq matches one code point of ranges; inside JSON strings the
// characters needing escapes are left out.
func (b *builder) classSeq(ranges []rune, jsonStr bool) []item {
	if jsonStr {
		ranges = intersect(ranges, jsonSafe)
	}
	return b.runeClass(ranges)
}

// jsonSafe are the code points a JSON string may hold unescaped.
var jsonSafe = []rune{0x20, 0x21, 0x23, 0x5B, 0x5D, utf8.MaxRune}

// intersect intersects two sorted lists of non-overlapping ranges.
func intersect(a, b []rune) []rune {
	var out []rune
	for i, j := 0, 0; i+1 < len(a) && j+1 < len(b); {
		lo, hi := max(a[i], b[j]), min(a[i+1], b[j+1])
		if lo <= hi {
			out = append(out, lo, hi)
		}
		if a[i+1] < b[j+1] {
			i += 2
		} else {
			j += 2
		}
	}
	return out
}

// sortRanges sorts and merges a list of ranges.
func sortRanges(rs []rune) []rune {
	type pair struct{ lo, hi rune }
	ps := make([]pair, 0, len(rs)/2)
	for i := 0; i+1 < len(rs); i += 2 {
		ps = append(ps, pair{rs[i], rs[i+1]})
	}
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].lo < ps[j-1].lo; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
	var out []rune
	for _, p := range ps {
		if n := len(out); n > 0 && p.lo <= out[n-1]+1 {
			out[n-1] = max(out[n-1], p.hi)
			continue
		}
		out = append(out, p.lo, p.hi)
	}
	return out
}

// CompileChoice compiles a list of alternatives: the output is exactly one
// of values.
func CompileChoice(values []string) (*Grammar, error) {
	if len(values) == 0 {
		return nil, invalidf("choice: no values")
	}
	n := 0
	b := &builder{}
	alts := make([][]item, 0, len(values))
	for _, v := range values {
		if n += len(v); n > MaxSourceBytes {
			return nil, tooLargef("choice values of more than %d bytes", MaxSourceBytes)
		}
		if v == "" {
			return nil, invalidf("choice: an empty value")
		}
		alts = append(alts, lit(v))
	}
	return b.finish(b.rule(alts...))
}

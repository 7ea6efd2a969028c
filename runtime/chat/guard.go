package chat

import "strings"

// stepFunc is the name of the Go callable that instrument inserts into
// every loop body and macro body; each call spends one step of the render's
// budget.
const stepFunc = "__weft_step__"

// instrument returns source with a step check, a block tag pair
//
//	{% if __weft_step__() %}{% endif %}
//
// inserted right after every {% for %} and {% macro %} tag, so that loop
// iterations and macro calls (the only ways a template can run for long or
// recurse) are counted. The check renders nothing, and being a block tag it
// keeps the whitespace rules (trim_blocks, lstrip_blocks, "-%}") that applied
// after the original tag: when the original tag ends with "-%}" the inserted
// one does too.
//
// The scan mirrors the engine's: "{{", "{%" and "{#" open tags, quoted
// strings inside "{{ }}" and "{% %}" may contain the closers, comments are
// skipped, and {% raw %} blocks are left untouched. An unclosed tag ends the
// scan; the engine then reports the syntax error.
func instrument(source string) string {
	var b strings.Builder
	b.Grow(len(source) + 256)
	inRaw := false
	last := 0 // source[last:] is not yet copied to b
	for i := 0; ; {
		t, ok := nextTag(source, i)
		if !ok {
			break
		}
		i = t.next
		if t.closer != "%}" {
			continue
		}
		word := firstWord(source[t.start:t.end])
		switch {
		case inRaw:
			if word == "endraw" {
				inRaw = false
			}
		case word == "raw":
			inRaw = true
		case word == "for" || word == "macro":
			b.WriteString(source[last:t.next])
			b.WriteString("{% if " + stepFunc + "() %}{% endif ")
			if t.trimRight {
				b.WriteString("-%}")
			} else {
				b.WriteString("%}")
			}
			last = t.next
		}
	}
	b.WriteString(source[last:])
	return b.String()
}

// tag is one {{ }}, {% %} or {# #} tag found by nextTag.
type tag struct {
	closer     string // "}}", "%}" or "#}"
	start, end int    // the content is source[start:end] (after a "-" trim marker)
	next       int    // the index just past the closer
	trimRight  bool   // the tag ends with "-" + closer
}

// nextTag finds the first complete tag at or after i, the way the engine
// scans: "{{", "{%" and "{#" open tags and quoted strings may contain the
// closers. ok is false when there is none; an unclosed tag ends the scan.
func nextTag(source string, i int) (t tag, ok bool) {
	for i+1 < len(source) {
		if source[i] != '{' {
			i++
			continue
		}
		var closer string
		switch source[i+1] {
		case '{':
			closer = "}}"
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		default:
			i++
			continue
		}
		start := i + 2
		if start < len(source) && source[start] == '-' {
			start++
		}
		end, next, trimRight, found := findCloser(source, start, closer)
		if !found {
			return tag{}, false
		}
		return tag{closer: closer, start: start, end: end, next: next, trimRight: trimRight}, true
	}
	return tag{}, false
}

// findCloser finds closer from position i, skipping quoted strings unless
// the tag is a comment. It returns where the tag content ends, where the
// text after the tag starts, and whether the tag ends with "-" + closer.
func findCloser(s string, i int, closer string) (end, next int, trimRight, ok bool) {
	for i < len(s) {
		ch := s[i]
		if closer != "#}" && (ch == '\'' || ch == '"') {
			i++
			for i < len(s) && s[i] != ch {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				i++
			}
			if i < len(s) {
				i++
			}
			continue
		}
		if ch == '-' && i+2 < len(s) && s[i+1] == closer[0] && s[i+2] == closer[1] {
			return i, i + 3, true, true
		}
		if i+1 < len(s) && ch == closer[0] && s[i+1] == closer[1] {
			return i, i + 2, false, true
		}
		i++
	}
	return 0, 0, false, false
}

// firstWord returns the statement keyword of a tag's content.
func firstWord(s string) string {
	s = strings.TrimLeft(s, " \t\r\n")
	n := 0
	for n < len(s) && (s[n] == '_' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z') {
		n++
	}
	return s[:n]
}

package chat

import (
	"fmt"
	"strconv"
	"strings"
)

// Segment is one piece of a rendered conversation: text the template wrote
// (its markup, which may spell control tokens such as "<|im_start|>") or the
// text of a message's content (data, which must never become a control
// token).
type Segment struct {
	Text    string
	Content bool // from a message's content, not from the template
}

// Content markers: each non-blank content is rendered as
// markerOpen + index + markerClose, then replaced by the content itself. The
// markers are supplementary private-use code points, which no template
// writes and no content reaches (contents never pass through the template).
const (
	markerOpen  = "\U000F0000"
	markerClose = "\U000F0001"
)

// RenderSegments renders msgs as Render does and says which parts of the
// output are message contents. The contents are replaced by markers while
// the template runs, so the template's own text is known exactly; a
// content's leading and trailing white space stay outside its marker, so a
// template that trims contents (| trim) still trims them. A template that
// cuts into a content (slicing) fails with ErrRender: its output cannot be
// split safely. A filter that maps the marker to itself (| upper) is not
// applied to the content.
//
// Concatenating the segments' texts gives Render's output for templates
// that only copy or trim contents.
func (t *Template) RenderSegments(msgs []Message, addGenerationPrompt bool) ([]Segment, error) {
	return t.RenderSegmentsVars(msgs, addGenerationPrompt, Vars{})
}

// RenderSegmentsVars is RenderSegments with the template variables of v, as
// RenderVars. Message contents and reasoning contents are marked as data;
// tool calls (names, ids, arguments), tool names and v's values are part of
// the template's text.
func (t *Template) RenderSegmentsVars(msgs []Message, addGenerationPrompt bool, v Vars) ([]Segment, error) {
	subst := make([]Message, len(msgs))
	// cores[i] is message i's trimmed content, cores[len(msgs)+i] its
	// trimmed reasoning content.
	cores := make([]string, 2*len(msgs))
	mark := func(s string, idx int) string {
		core := strings.TrimSpace(s)
		cores[idx] = core
		if core == "" {
			return s
		}
		k := strings.Index(s, core)
		return s[:k] + markerOpen + strconv.Itoa(idx) + markerClose + s[k+len(core):]
	}
	for i, m := range msgs {
		subst[i] = m
		subst[i].Content = mark(m.Content, i)
		subst[i].ReasoningContent = mark(m.ReasoningContent, len(msgs)+i)
	}
	out, err := t.RenderVars(subst, addGenerationPrompt, v)
	if err != nil {
		return nil, err
	}
	var segs []Segment
	for out != "" {
		j := strings.Index(out, markerOpen)
		if j < 0 {
			break
		}
		if j > 0 {
			segs = append(segs, Segment{Text: out[:j]})
		}
		rest := out[j+len(markerOpen):]
		e := strings.Index(rest, markerClose)
		if e < 0 {
			return nil, fmt.Errorf("%w %s: the template alters message contents", ErrRender, t.cfg.Name)
		}
		i, err := strconv.Atoi(rest[:e])
		if err != nil || i < 0 || i >= len(cores) || cores[i] == "" {
			return nil, fmt.Errorf("%w %s: the template alters message contents", ErrRender, t.cfg.Name)
		}
		segs = append(segs, Segment{Text: cores[i], Content: true})
		out = rest[e+len(markerClose):]
	}
	if out != "" {
		segs = append(segs, Segment{Text: out})
	}
	for _, sg := range segs {
		if !sg.Content && strings.ContainsFunc(sg.Text, isMarkerRune) {
			return nil, fmt.Errorf("%w %s: the template alters message contents", ErrRender, t.cfg.Name)
		}
	}
	return segs, nil
}

func isMarkerRune(r rune) bool { return r == 0xF0000 || r == 0xF0001 }

package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/weft-inference/weft/runtime/toolcall"
)

// blocks assembles a reply's content blocks in the order the model wrote
// them (thinking, text, tool_use), and streams them when send is set:
// content_block_start, its deltas (text_delta, thinking_delta,
// input_json_delta) and content_block_stop, one block open at a time.
type blocks struct {
	list  []contentBlock
	body  []strings.Builder // each block's text, thinking or input so far
	done  []bool            // a tool_use block's input is complete (its CallEnd came)
	calls map[int]int       // a call's index -> its block's
	open  int               // the open block, or -1
	send  func(name string, v any) error
}

func newBlocks(send func(name string, v any) error) *blocks {
	return &blocks{open: -1, calls: map[int]int{}, send: send}
}

// start closes the open block and opens b.
func (bs *blocks) start(b contentBlock) error {
	if err := bs.close(); err != nil {
		return err
	}
	bs.list = append(bs.list, b)
	bs.body = append(bs.body, strings.Builder{})
	bs.done = append(bs.done, false)
	bs.open = len(bs.list) - 1
	if bs.send == nil {
		return nil
	}
	empty := ""
	switch b.Type {
	case "text":
		b.Text = &empty
	case "thinking":
		b.Thinking, b.Signature = &empty, &empty
	case "tool_use":
		b.Input = json.RawMessage("{}")
	}
	return bs.send("content_block_start", contentBlockStartEvent{Type: "content_block_start", Index: bs.open, ContentBlock: b})
}

// close ends the open block, if any.
func (bs *blocks) close() error {
	if bs.open < 0 {
		return nil
	}
	i := bs.open
	bs.open = -1
	if bs.send == nil {
		return nil
	}
	return bs.send("content_block_stop", indexEvent{Type: "content_block_stop", Index: i})
}

// text adds s to the open text or thinking block (typ), opening one when
// the open block is of another type.
func (bs *blocks) text(typ, s string) error {
	if s == "" {
		return nil
	}
	if bs.open < 0 || bs.list[bs.open].Type != typ {
		if err := bs.start(contentBlock{Type: typ}); err != nil {
			return err
		}
	}
	bs.body[bs.open].WriteString(s)
	if bs.send == nil {
		return nil
	}
	d := delta{Type: "text_delta", Text: &s}
	if typ == "thinking" {
		d = delta{Type: "thinking_delta", Thinking: &s}
	}
	return bs.send("content_block_delta", contentBlockDeltaEvent{Type: "content_block_delta", Index: bs.open, Delta: d})
}

// apply adds a parsed reply's event.
func (bs *blocks) apply(ev toolcall.Event) error {
	switch ev.Kind {
	case toolcall.Content:
		return bs.text("text", ev.Text)
	case toolcall.Reasoning:
		return bs.text("thinking", ev.Text)
	case toolcall.CallStart:
		if err := bs.start(contentBlock{Type: "tool_use", ID: ev.ID, Name: ev.Name}); err != nil {
			return err
		}
		bs.calls[ev.Index] = bs.open
	case toolcall.CallArgs:
		i, ok := bs.calls[ev.Index]
		if !ok || ev.Text == "" {
			return nil
		}
		bs.body[i].WriteString(ev.Text)
		if bs.send != nil {
			s := ev.Text
			return bs.send("content_block_delta", contentBlockDeltaEvent{Type: "content_block_delta", Index: i,
				Delta: delta{Type: "input_json_delta", PartialJSON: &s}})
		}
	case toolcall.CallEnd:
		if i, ok := bs.calls[ev.Index]; ok {
			bs.done[i] = true
			if bs.open == i {
				return bs.close()
			}
		}
	}
	return nil
}

// content is the message's content: every block, less a tool_use whose
// input the output cut off.
func (bs *blocks) content() []contentBlock {
	out := make([]contentBlock, 0, len(bs.list))
	for i, b := range bs.list {
		s := bs.body[i].String()
		switch b.Type {
		case "text":
			b.Text = &s
		case "thinking":
			empty := ""
			b.Thinking, b.Signature = &s, &empty
		case "tool_use":
			if !bs.done[i] {
				continue
			}
			b.Input = json.RawMessage(s)
		}
		out = append(out, b)
	}
	return out
}

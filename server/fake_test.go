package server

import (
	"hash/fnv"
	"strings"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

// Fake tokenizer: one token per byte (id = 3 + byte), BOS 1, EOS 2.
const (
	fakeBOS   = 1
	fakeEOS   = 2
	fakeVocab = 3 + 256
)

type fakeTokenizer struct{}

func (fakeTokenizer) Encode(text string, addSpecial, _ bool) []int32 {
	var ids []int32
	if addSpecial {
		ids = append(ids, fakeBOS)
	}
	for i := 0; i < len(text); i++ {
		ids = append(ids, 3+int32(text[i]))
	}
	return ids
}

func (fakeTokenizer) EncodeSegments(segs []tokenizer.Segment, addSpecial bool) []int32 {
	var b strings.Builder
	for _, sg := range segs {
		b.WriteString(sg.Text)
	}
	return fakeTokenizer{}.Encode(b.String(), addSpecial, false)
}

func (fakeTokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 3 {
			b.WriteByte(byte(id - 3))
		}
	}
	return b.String()
}

func (fakeTokenizer) VocabSize() int { return fakeVocab }
func (fakeTokenizer) BOS() int32     { return fakeBOS }
func (fakeTokenizer) AddBOS() bool   { return true }

// fakeChat renders "role: content\n" per message and "assistant: " to
// prompt the reply.
type fakeChat struct{}

func (fakeChat) Render(msgs []chat.Message, gen bool) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role + ": " + m.Content + "\n")
	}
	if gen {
		b.WriteString("assistant: ")
	}
	return b.String(), nil
}

func (c fakeChat) RenderSegments(msgs []chat.Message, gen bool) ([]chat.Segment, error) {
	var segs []chat.Segment
	for _, m := range msgs {
		segs = append(segs, chat.Segment{Text: m.Role + ": "}, chat.Segment{Text: m.Content, Content: true}, chat.Segment{Text: "\n"})
	}
	if gen {
		segs = append(segs, chat.Segment{Text: "assistant: "})
	}
	return segs, nil
}

// The fake model is schedtest.Model with nextToken: its tokens are
// lowercase letters of the byte vocabulary, and schedtest.Bytes decodes them.

// window is how many trailing positions nextToken reads.
const window = 8

// nextToken is the fake's sampling function: a hash of the history length
// and its last window tokens.
func nextToken(history []int32) int32 {
	h := fnv.New64a()
	n := len(history)
	h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16)})
	for _, t := range history[max(0, n-window):] {
		h.Write([]byte{byte(t), byte(t >> 8), byte(t >> 16), byte(t >> 24)})
	}
	return 3 + 'a' + int32(h.Sum64()%26)
}

// refGenerate is what n greedy steps of the fake produce after prompt.
func refGenerate(prompt []int32, n int) []int32 {
	return schedtest.Reference(prompt, n, nextToken)
}

package server

import (
	"context"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
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

type fakeDecoder struct{}

func (fakeDecoder) Add(id int32) string { return fakeTokenizer{}.Decode([]int32{id}) }
func (fakeDecoder) Flush() string       { return "" }

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

// fakeModel implements scheduler.Model. It keeps a fake KV cache (the token
// at every position of every block) and samples a lowercase letter chosen by
// a hash of the whole history read back through the block table, so wrong
// positions, blocks or prefix reuse change the output. When gate is set,
// every step first takes a value from it (close it to run freely).
type fakeModel struct {
	bs   int
	gate chan struct{}

	mu sync.Mutex
	kv [][]int32
}

func newFakeModel(cfg scheduler.Config) *fakeModel {
	kv := make([][]int32, cfg.NumBlocks)
	for i := range kv {
		kv[i] = make([]int32, cfg.BlockSize)
	}
	return &fakeModel{bs: cfg.BlockSize, kv: kv}
}

// window is how many trailing positions the fake reads back.
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
	hist := append([]int32(nil), prompt...)
	for range n {
		hist = append(hist, nextToken(hist))
	}
	return hist[len(prompt):]
}

func (m *fakeModel) Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error) {
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]sample.Result, len(seqs))
	for i, s := range seqs {
		for j, t := range s.Tokens {
			p := s.Pos + j
			m.kv[s.Blocks[p/m.bs]][p%m.bs] = t
		}
		if !s.Logits {
			continue
		}
		n := s.Pos + len(s.Tokens)
		hist := make([]int32, n) // only the last window positions are read back
		for p := max(0, n-window); p < n; p++ {
			hist[p] = m.kv[s.Blocks[p/m.bs]][p%m.bs]
		}
		out[i] = sample.Result{Token: nextToken(hist)}
	}
	return out, nil
}

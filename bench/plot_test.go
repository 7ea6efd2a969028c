package bench

import (
	"bytes"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTokenRate(t *testing.T) {
	recs := []Record{
		{Sent: msd(1000), Chunks: []ChunkTime{ct(100, 2), ct(600, 3)}},          // at 1.1s, 1.6s
		{Sent: msd(1200), Chunks: []ChunkTime{ct(1000, 4)}},                     // at 2.2s
		{Sent: msd(1300), Chunks: []ChunkTime{ct(10, 9)}, Err: errors.New("x")}, // failed: not counted
	}
	// Bins of 500ms from 1.0s: [1.0,1.5) 2 tokens, [1.5,2.0) 3, [2.0,2.5) 4.
	got := TokenRate(recs, 500*time.Millisecond)
	if diff := cmp.Diff([]float64{4, 6, 8}, got); diff != "" {
		t.Errorf("TokenRate (-want +got):\n%s", diff)
	}
}

func TestWritePlot(t *testing.T) {
	recs := []Record{
		rec(3, 30, ct(10, 1), ct(20, 1), ct(30, 1)),
		rec(2, 50, ct(20, 1), ct(50, 1)),
		{Err: errors.New("failed")},
	}
	res := NewResult(recs, time.Second, SLO{}, false)
	path := filepath.Join(t.TempDir(), "p.png")
	if err := WritePlot(path, &res); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("not a PNG: %v", err)
	}
}

func TestProgress(t *testing.T) {
	var b syncBuffer
	p := startProgress(&b, 4, 0)
	p.done(false)
	p.done(true)
	p.stop()
	out := b.String()
	if want := "[###############...............] 2/4 done, 1 failed"; !strings.Contains(out, want) {
		t.Errorf("progress output %q lacks %q", out, want)
	}
	var nilp *progress
	nilp.done(true) // a nil progress does nothing
	nilp.stop()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestTokenITLs(t *testing.T) {
	tests := []struct {
		name   string
		chunks []ChunkTime
		want   []time.Duration
	}{
		{"none", nil, nil},
		{"one delivery", []ChunkTime{ct(5, 3)}, nil},
		{"one token each", []ChunkTime{ct(5, 1), ct(7, 1), ct(10, 1)}, []time.Duration{msd(2), msd(3)}},
		{"k tokens: k gaps of interval/k", []ChunkTime{ct(5, 1), ct(11, 3)}, []time.Duration{msd(2), msd(2), msd(2)}},
		{
			"messages read together are one delivery",
			[]ChunkTime{ct(5, 1), ct(9, 1), ct(9.001, 1), ct(9.05, 2), ct(13, 1)},
			// 9, 9.001 and 9.05 are one delivery of 4 tokens 4 ms after 5;
			// 13 is 3.95 ms after that delivery's last message.
			[]time.Duration{msd(1), msd(1), msd(1), msd(1), msd(3.95)},
		},
	}
	for _, tc := range tests {
		r := Record{Chunks: tc.chunks}
		if diff := cmp.Diff(tc.want, r.TokenITLs()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

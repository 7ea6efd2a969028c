package scheduler

import (
	"slices"
	"testing"
)

func TestMinTokensSuppressesEOGAndStopIDs(t *testing.T) {
	s, err := New(Config{BlockSize: 4, NumBlocks: 8, VocabSize: 10, IsEOG: func(id int32) bool { return id == 2 || id == 7 }}, newFakeModel(Config{BlockSize: 4, NumBlocks: 8}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		req       Request
		wantSup   []int32
		wantUntil int
	}{
		{"no min tokens", Request{StopTokenIDs: []int32{5}}, nil, 0},
		{"eog and stop ids", Request{MinTokens: 3, StopTokenIDs: []int32{5}}, []int32{5, 2, 7}, 3},
		{"ignore eos keeps stop ids", Request{MinTokens: 4, IgnoreEOS: true, StopTokenIDs: []int32{5}}, []int32{5}, 4},
		{"ignore eos, no stop ids", Request{MinTokens: 4, IgnoreEOS: true}, nil, 0},
	} {
		p := s.minTokensParams(tc.req)
		if !slices.Equal(p.Suppress, tc.wantSup) || p.SuppressUntil != tc.wantUntil {
			t.Errorf("%s: Suppress %v until %d, want %v until %d", tc.name, p.Suppress, p.SuppressUntil, tc.wantSup, tc.wantUntil)
		}
	}
}

package sample

import "testing"

func TestSuppressUntil(t *testing.T) {
	logits := []float32{0, 5, 1, 9} // token 3 is the argmax
	s := New(Params{Suppress: []int32{3, 99, -1}, SuppressUntil: 2}, nil)
	var got []int32
	for range 4 {
		got = append(got, s.Sample(logits).Token)
	}
	want := []int32{1, 1, 3, 3}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tokens %v, want %v", got, want)
		}
	}
	// Logprobs describe the raw logits even while a token is suppressed.
	s = New(Params{Suppress: []int32{3}, SuppressUntil: 1, Logprobs: true, TopLogprobs: 1}, nil)
	r := s.Sample(logits)
	if r.Token != 1 || r.Top[0].Token != 3 {
		t.Errorf("got token %d top %v, want token 1 with top token 3", r.Token, r.Top)
	}
}

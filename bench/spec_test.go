package bench

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The result totals the server-reported drafts of completed requests and
// prints the acceptance rate; without drafts it prints nothing about them.
func TestResultSpeculation(t *testing.T) {
	recs := []Record{
		{OutputTokens: 10, DraftTokens: 8, AcceptedDraftTokens: 6, End: time.Second},
		{OutputTokens: 10, DraftTokens: 4, AcceptedDraftTokens: 0, End: time.Second},
		{Err: errors.New("failed"), DraftTokens: 100, AcceptedDraftTokens: 100},
	}
	for _, tc := range []struct {
		name              string
		recs              []Record
		drafted, accepted int
		line              string
	}{
		{"drafts", recs, 12, 6, "6 of 12 drafted tokens accepted (50.0%)"},
		{"none", []Record{{OutputTokens: 3, End: time.Second}}, 0, 0, ""},
	} {
		r := NewResult(tc.recs, time.Second, SLO{}, false)
		if r.DraftTokens != tc.drafted || r.AcceptedDraftTokens != tc.accepted {
			t.Errorf("%s: drafted %d accepted %d, want %d and %d", tc.name, r.DraftTokens, r.AcceptedDraftTokens, tc.drafted, tc.accepted)
		}
		var b strings.Builder
		if err := r.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "speculation"); got != (tc.line != "") || !strings.Contains(b.String(), tc.line) {
			t.Errorf("%s: table\n%s\nwant speculation line %q", tc.name, b.String(), tc.line)
		}
	}
}

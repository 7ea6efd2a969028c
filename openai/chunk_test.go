package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTextChunkIsTheMarshaledChunk: the hand-built text chunk is byte for
// byte what json.Marshal makes of the chunk structure.
func TestTextChunkIsTheMarshaledChunk(t *testing.T) {
	for _, k := range []kind{kindCompletion, kindChat} {
		for _, text := range []string{"", "hello", ` "quoted" \ back`, "<b>&amp;</b>", "ünïcødé ✓", "\n\t\x01", "\u2028"} {
			rec := httptest.NewRecorder()
			o := &writer{h: &Handler{}, stall: 1, w: rec, rc: http.NewResponseController(rec), j: &job{id: `cmpl-"x"`, kind: k, model: "m<1>"}, created: 1234}
			c := &choice{index: 3}
			if err := o.textChunk(c, text); err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(o.chunk(c, chunkDelta{text: text}, nil))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("data: "+string(want)+"\n\n", rec.Body.String()); diff != "" {
				t.Errorf("kind %d, text %q (-marshaled +built):\n%s", k, text, diff)
			}
		}
	}
}

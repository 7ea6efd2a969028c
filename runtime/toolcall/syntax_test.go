package toolcall

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weft-inference/weft/runtime/constrain"
)

// TestSyntaxGrammar compiles each format's call grammar with
// runtime/constrain, checks that it accepts the canonical calls and
// rejects malformed ones, and that the parser reads what it accepts back
// to the same calls.
func TestSyntaxGrammar(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}}`)},
		{Name: "get_time"},
	}
	weather := `{"city": "Par\"is <tool_call>", "n": [1, -2.5e3, {"a": null}]}`
	for _, f := range Formats() {
		t.Run(f.String(), func(t *testing.T) {
			s, err := CallSyntax(f, tools)
			if f == FormatQwen3Coder || f == FormatDeepSeekDSML {
				if !errors.Is(err, ErrNoSyntax) {
					t.Fatalf("CallSyntax: %v, want ErrNoSyntax", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			write := func(i int, args string) string { return s.Tools[i].Prefix + args + s.Tools[i].Suffix }
			one := s.Open + write(0, weather) + s.Close
			two := s.Open + write(0, weather) + s.Between + write(1, "{}") + s.Close
			if !strings.HasPrefix(one, s.Trigger) {
				t.Errorf("call %q does not start with the trigger %q", one, s.Trigger)
			}
			for _, parallel := range []bool{false, true} {
				g, err := constrain.CompileGBNF(s.GBNF(parallel, nil))
				if err != nil {
					t.Fatalf("CompileGBNF: %v\n%s", err, s.GBNF(parallel, nil))
				}
				for _, tc := range []struct {
					text string
					want bool
				}{
					{one, true},
					{two, parallel},
					{s.Open + write(1, `{"x": }`) + s.Close, false},               // malformed JSON
					{s.Open + write(0, `{"city": "x"`) + s.Close, false},          // unclosed object
					{s.Open + write(0, `["x"]`) + s.Close, false},                 // not an object
					{strings.Replace(one, "get_weather", "get_weathr", 1), false}, // unknown tool
				} {
					if got := g.Match([]byte(tc.text)); got != tc.want {
						t.Errorf("parallel %v: Match(%q) = %v, want %v", parallel, tc.text, got, tc.want)
					}
				}
			}
			// What the grammar accepts, the parser reads back.
			got := feed(t, f, Options{}, []string{two})
			want := result{Calls: calls("get_weather", weather, "get_time", "{}")}
			if got.Err != "" || len(got.Calls) != 2 || got.Calls[0].Args != weather || got.Calls[1].Name != "get_time" || got.Content != "" {
				t.Errorf("parsing %q: got %+v, want %+v", two, got, want)
			}
		})
	}
}

package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParser feeds arbitrary output to every format, whole and in random
// pieces. It must never panic, every stream must keep the event rules
// feed checks (a call's arguments parse as one JSON object when it ends;
// nothing after a failure; Finish's error iff a CallFailed), and the
// pieces must not change the merged result. The seed corpus is in
// testdata/fuzz/FuzzParser; more seeds come from the format tests.
func FuzzParser(f *testing.F) {
	for _, s := range []string{
		"<think>a</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1]}}\n</tool_call>",
		"[TOOL_CALLS]f[CALL_ID]abcDEF123[ARGS]{\"q\": \"x\"}",
		"<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"false\">[1]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		"<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
		"{\"name\": \"f\", \"parameters\": {}}; <|python_tag|>x.call(a=1)",
		"{\"tool_calls\": [{\"name\": \"f\", \"arguments\": \"{}\"}]}",
	} {
		for _, fm := range Formats() {
			f.Add(uint8(fm), s, uint64(len(s)))
		}
	}
	tools := []Tool{{Name: "f", Parameters: json.RawMessage(`{"properties": {"a": {"type": "integer"}, "s": {"type": "string"}}}`)}}
	f.Fuzz(func(t *testing.T, format uint8, text string, seed uint64) {
		fm := Format(int(format) % len(formatNames))
		opts := Options{Tools: tools, InReasoning: seed&1 != 0, RawReasoning: seed&2 != 0}
		whole := feed(t, fm, opts, []string{text})
		rng := rand.New(rand.NewPCG(seed, 2))
		var pieces []string
		for rest := text; rest != ""; {
			n := min(1+rng.IntN(6), len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		if diff := cmp.Diff(whole, feed(t, fm, opts, pieces)); diff != "" {
			t.Fatalf("%v %q in pieces %q: (-whole +pieces)\n%s", fm, text, pieces, diff)
		}
	})
}

// FuzzJSONScan checks the incremental checker against encoding/json: it
// accepts a text (one value ending at its last byte) exactly when
// json.Valid does.
func FuzzJSONScan(f *testing.F) {
	for _, s := range []string{`{"a": [1, -2.5e+3, true, null, "x\u00e9\"\\"]}`, `0`, `-0.1`, `"\ud83d\ude00"`, `[]`, `{}`, `{"a":}`, `01`, `1.`, `[1,]`, "\"a\tb\"", ` {"a" : [ ] } `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || isSpace(s[len(s)-1]) {
			return
		}
		var sc jscan
		accept := false
		for i := 0; i < len(s); i++ {
			r := sc.step(s[i])
			if r == jCont {
				if i == len(s)-1 {
					accept = sc.complete()
				}
				continue
			}
			accept = r == jEnd && i == len(s)-1
			break
		}
		if want := json.Valid([]byte(s)); accept != want {
			t.Fatalf("jscan accepts %q: %v; json.Valid: %v", s, accept, want)
		}
	})
}

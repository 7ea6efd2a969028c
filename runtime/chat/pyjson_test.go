package chat

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTojson checks | tojson against Python's json.dumps (the expected
// texts are what CPython 3 prints for the same calls).
func TestTojson(t *testing.T) {
	const value = `{"b": 1, "a": [1.0, 2.5, 1e-05, 1e+16, true, null], "s": "é\"\\\n\t\u0001 <&> 😀", "e": {}, "l": []}`
	for _, tc := range []struct {
		call, want string
	}{
		{"v | tojson", `{"b": 1, "a": [1.0, 2.5, 1e-05, 1e+16, true, null], "s": "é\"\\\n\t\u0001 <&> 😀", "e": {}, "l": []}`},
		{"v | tojson(ensure_ascii=True)", `{"b": 1, "a": [1.0, 2.5, 1e-05, 1e+16, true, null], "s": "\u00e9\"\\\n\t\u0001 <&> \ud83d\ude00", "e": {}, "l": []}`},
		{"v | tojson(sort_keys=true, separators=[',', ':'])", `{"a":[1.0,2.5,1e-05,1e+16,true,null],"b":1,"e":{},"l":[],"s":"é\"\\\n\t\u0001 <&> 😀"}`},
		{"v.a[:2] | tojson(indent=2)", "[\n  1.0,\n  2.5\n]"},
		{"{'x': v.e, 'y': [v.l]} | tojson(indent=1)", "{\n \"x\": {},\n \"y\": [\n  []\n ]\n}"},
		{"'x' | tojson", `"x"`},
		{"v.s|tojson", `"é\"\\\n\t\u0001 <&> 😀"`},
	} {
		tmpl, err := New("{{ "+tc.call+" }}", "", "")
		if err != nil {
			t.Fatalf("%s: %v", tc.call, err)
		}
		got, err := tmpl.RenderVars(nil, false, Vars{Extra: map[string]json.RawMessage{"v": json.RawMessage(value)}})
		if err != nil {
			t.Fatalf("%s: %v", tc.call, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.call, diff)
		}
	}
}

func TestPyFloat(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {1, "1.0"}, {-2.5, "-2.5"}, {0.1, "0.1"}, {1e-4, "0.0001"}, {1e-5, "1e-05"},
		{1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1.5e300, "1.5e+300"}, {math.Inf(1), "Infinity"}, {math.NaN(), "NaN"},
	} {
		if got := pyFloat(tc.f); got != tc.want {
			t.Errorf("pyFloat(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestStrftime(t *testing.T) {
	at := time.Date(2026, time.March, 5, 14, 7, 9, 0, time.UTC)
	for _, tc := range []struct{ format, want string }{
		{"%Y-%m-%d", "2026-03-05"},
		{"%d %b %Y", "05 Mar 2026"},
		{"%B %d, %Y", "March 05, 2026"},
		{"%A %a %-d %e %j %y", "Thursday Thu 5  5 064 26"},
		{"%H:%M:%S %I %p %% %Q", "14:07:09 02 PM % %Q"},
	} {
		if got := strftime(at, tc.format); got != tc.want {
			t.Errorf("strftime(%q) = %q, want %q", tc.format, got, tc.want)
		}
	}
}

// TestRewriteFilters: only the tojson filter is renamed, not text, string
// literals, comments or raw blocks.
func TestRewriteFilters(t *testing.T) {
	src := "tojson {{ x | tojson }}{{ x|tojson(indent=2) }}{{ 'a | tojson' }}{# | tojson #}{% raw %}{{ x | tojson }}{% endraw %}{{ x | tojsonx }}{% set y = x|tojson %}"
	want := "tojson {{ x | " + tojsonFilter + " }}{{ x|" + tojsonFilter + "(indent=2) }}{{ 'a | tojson' }}{# | tojson #}{% raw %}{{ x | tojson }}{% endraw %}{{ x | tojsonx }}{% set y = x|" + tojsonFilter + " %}"
	if diff := cmp.Diff(want, rewriteFilters(src)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestVarsInput: what RenderVars gives the template, and the input it
// refuses.
func TestVarsInput(t *testing.T) {
	src := "{{ messages | tojson }}|{{ tools | tojson }}|{{ enable_thinking }}|{{ reasoning_effort }}|{{ builtin_tools | join(',') }}|{{ date_string }}|{{ strftime_now('%Y') }}|{{ custom.k }}|{{ undefined_thing is defined }}"
	tmpl, err := New(src, "", "")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "assistant", Content: "c", ReasoningContent: "r", ToolCalls: []ToolCall{
		{ID: "id1", Name: "f", Arguments: `{"z": 1, "a": [2]}`}, {Name: "g", Arguments: "not json"}}},
		{Role: "tool", Content: "out", ToolCallID: "id1", Name: "f"}}
	got, err := tmpl.RenderVars(msgs, false, Vars{
		Tools:           []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f"}}`)},
		EnableThinking:  boolPtr(false),
		ReasoningEffort: "low",
		BuiltinTools:    []string{"browser", "python"},
		DateString:      "1 Jan 2026",
		Now:             fixedNow,
		Extra:           map[string]json.RawMessage{"custom": json.RawMessage(`{"k": "v"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"role": "assistant", "content": "c", "reasoning_content": "r", "tool_calls": [` +
		`{"id": "id1", "type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": [2]}}}, ` +
		`{"type": "function", "function": {"name": "g", "arguments": "not json"}}]}, ` +
		`{"role": "tool", "content": "out", "tool_call_id": "id1", "name": "f"}]` +
		`|[{"type": "function", "function": {"name": "f"}}]|False|low|browser,python|1 Jan 2026|2026|v|False`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	for _, v := range []Vars{
		{Tools: []json.RawMessage{json.RawMessage(`[1]`)}},
		{Tools: []json.RawMessage{json.RawMessage(`{"a": `)}},
		{Extra: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)}},
		{Extra: map[string]json.RawMessage{"x": json.RawMessage(`{} {}`)}},
	} {
		if _, err := tmpl.RenderVars(nil, false, v); !errors.Is(err, ErrBadInput) {
			t.Errorf("RenderVars(%+v) = %v, want ErrBadInput", v, err)
		}
	}
}

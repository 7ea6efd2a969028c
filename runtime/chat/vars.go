package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// ToolCall is one function call made by an assistant message, as in
// OpenAI's chat API.
type ToolCall struct {
	ID   string // "id" (omitted when empty)
	Name string // function.name
	// Arguments is function.arguments, JSON text. A template sees it as a
	// mapping when it is a JSON object (Hugging Face's convention: templates
	// write it with | tojson or walk its items), else as the string.
	Arguments string
}

// Vars are the template variables beyond the conversation that 2026 chat
// templates read. A zero field leaves its variable undefined, so the
// template's own default applies.
type Vars struct {
	// Tools are OpenAI-style tool definitions ("tools"), each a JSON object
	// such as {"type": "function", "function": {"name": ..., "description":
	// ..., "parameters": {...}}}. Key order is kept (| tojson prints it).
	Tools []json.RawMessage
	// EnableThinking is "enable_thinking" (Qwen3, DeepSeek V3.1, ...).
	EnableThinking *bool
	// ReasoningEffort is "reasoning_effort" (gpt-oss: "low", "medium",
	// "high").
	ReasoningEffort string
	// BuiltinTools is "builtin_tools" (Llama 3.1: "brave_search",
	// "wolfram_alpha"; gpt-oss: "browser", "python").
	BuiltinTools []string
	// DateString is "date_string" (Llama 3.x's "Today Date").
	DateString string
	// Now is the clock of strftime_now() (zero: the time of the render).
	Now time.Time
	// Extra holds further variables (Hugging Face's chat_template_kwargs),
	// each a JSON value. They cannot replace the variables this package
	// sets (messages, add_generation_prompt, bos_token, eos_token, the
	// fields above, and the functions).
	Extra map[string]json.RawMessage
}

// ErrBadInput: a message or a Vars field cannot be given to the template
// (a tool definition that is not a JSON object, an Extra name that is
// reserved...). It is a client error.
var ErrBadInput = errors.New("invalid chat template input")

// reserved are the names Extra may not set.
var reserved = map[string]bool{
	"messages": true, "add_generation_prompt": true, "bos_token": true, "eos_token": true,
	"tools": true, "enable_thinking": true, "reasoning_effort": true, "builtin_tools": true,
	"date_string": true, "raise_exception": true, "range": true, "strftime_now": true,
	stepFunc: true, tojsonFilter: true,
}

// messageValue is a message as templates read it: a dict with role and
// content first, then reasoning_content, tool_calls, tool_call_id and name
// when set (Hugging Face's field names).
func messageValue(m Message) (jinja.Value, error) {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", jinja.NewString(m.Content))
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			cv := jinja.NewDict()
			cd := cv.AsDict()
			if c.ID != "" {
				cd.Set("id", jinja.NewString(c.ID))
			}
			cd.Set("type", jinja.NewString("function"))
			fv := jinja.NewDict()
			fd := fv.AsDict()
			fd.Set("name", jinja.NewString(c.Name))
			args := jinja.NewString(c.Arguments)
			if t := strings.TrimSpace(c.Arguments); strings.HasPrefix(t, "{") {
				if a, err := jsonToValue([]byte(t)); err == nil {
					args = a
				}
			}
			fd.Set("arguments", args)
			cd.Set("function", fv)
			calls[i] = cv
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	return v, nil
}

// addVars puts the set fields of v into data.
func (v *Vars) addVars(data map[string]jinja.Value) error {
	if v.Tools != nil {
		tools := make([]jinja.Value, len(v.Tools))
		for i, raw := range v.Tools {
			tv, err := jsonToValue(raw)
			if err != nil || !tv.IsDict() {
				return fmt.Errorf("%w: tool %d is not a JSON object", ErrBadInput, i)
			}
			tools[i] = tv
		}
		data["tools"] = jinja.NewList(tools)
	}
	if v.EnableThinking != nil {
		data["enable_thinking"] = jinja.NewBool(*v.EnableThinking)
	}
	if v.ReasoningEffort != "" {
		data["reasoning_effort"] = jinja.NewString(v.ReasoningEffort)
	}
	if v.BuiltinTools != nil {
		items := make([]jinja.Value, len(v.BuiltinTools))
		for i, s := range v.BuiltinTools {
			items[i] = jinja.NewString(s)
		}
		data["builtin_tools"] = jinja.NewList(items)
	}
	if v.DateString != "" {
		data["date_string"] = jinja.NewString(v.DateString)
	}
	for _, k := range slices.Sorted(maps.Keys(v.Extra)) {
		if reserved[k] {
			return fmt.Errorf("%w: extra variable %q is reserved", ErrBadInput, k)
		}
		ev, err := jsonToValue(v.Extra[k])
		if err != nil {
			return fmt.Errorf("%w: extra variable %q: %v", ErrBadInput, k, err)
		}
		data[k] = ev
	}
	return nil
}

// jsonToValue decodes one JSON value into engine values, keeping the order
// of object keys (the engine's dicts are ordered; Go maps are not). Integers
// that fit in int64 become ints, other numbers floats (so an integer beyond
// int64 prints as a float, where Python would keep it exact).
func jsonToValue(b []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("data after the JSON value")
	}
	return v, nil
}

// maxJSONDepth bounds the nesting of decoded JSON.
const maxJSONDepth = 128

func decodeValue(dec *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), fmt.Errorf("JSON nested more than %d deep", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(t), nil
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		if n, err := strconv.ParseInt(t.String(), 10, 64); err == nil {
			return jinja.NewInt(n), nil
		}
		f, err := t.Float64()
		if err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewFloat(f), nil
	case json.Delim:
		switch t {
		case '[':
			var items []jinja.Value
			for dec.More() {
				it, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, it)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return jinja.NewList(items), nil
		case '{':
			v := jinja.NewDict()
			d := v.AsDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				key, _ := kt.(string)
				val, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.Set(key, val)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return v, nil
		}
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}

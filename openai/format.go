package openai

import (
	"encoding/json"
	"errors"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/constrain"
	"github.com/weft-inference/weft/runtime/sample"
)

// responseFormat is OpenAI's response_format: {"type": "text"},
// {"type": "json_object"} or {"type": "json_schema", "json_schema":
// {"name", "schema", "strict"}}.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// formatParams are the structured-output parameters: OpenAI's
// response_format and vLLM's guided_json, guided_regex, guided_choice and
// guided_grammar. At most one may be given.
type formatParams struct {
	ResponseFormat *responseFormat `json:"response_format"`
	GuidedJSON     json.RawMessage `json:"guided_json"`
	GuidedRegex    *string         `json:"guided_regex"`
	GuidedChoice   []string        `json:"guided_choice"`
	GuidedGrammar  *string         `json:"guided_grammar"`
}

// constraint decodes the request's format (nil: none) and compiles it
// through the Door's cache.
func (h *Handler) constraint(p formatParams) (sample.Constraint, error) {
	var f constrain.Format
	param, n := "", 0
	if rf := p.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			f.JSONObject, param, n = true, "response_format", n+1
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return nil, badParam("response_format", "json_schema.schema is required")
			}
			f.JSONSchema, param, n = string(rf.JSONSchema.Schema), "response_format", n+1
		default:
			return nil, badParam("response_format", "type %q: want text, json_object or json_schema", rf.Type)
		}
	}
	if len(p.GuidedJSON) > 0 && string(p.GuidedJSON) != "null" {
		schema := string(p.GuidedJSON)
		var s string
		if json.Unmarshal(p.GuidedJSON, &s) == nil { // vLLM accepts the schema as a string too
			schema = s
		}
		f.JSONSchema, param, n = schema, "guided_json", n+1
	}
	if p.GuidedRegex != nil {
		f.Regex, param, n = *p.GuidedRegex, "guided_regex", n+1
	}
	if p.GuidedChoice != nil {
		f.Choice, param, n = p.GuidedChoice, "guided_choice", n+1
	}
	if p.GuidedGrammar != nil {
		f.Grammar, param, n = *p.GuidedGrammar, "guided_grammar", n+1
	}
	switch {
	case n == 0:
		return nil, nil
	case n > 1:
		return nil, badParam(param, "only one of response_format, guided_json, guided_regex, guided_choice and guided_grammar may be set")
	}
	return h.compileFormat(param, f)
}

// compileFormat compiles f through the Door's cache (one for every door);
// a format that does not compile, or a model that cannot enforce one, is a
// 400 naming param.
func (h *Handler) compileFormat(param string, f constrain.Format) (sample.Constraint, error) {
	c, err := h.door.Constraint(f)
	if errors.Is(err, frontdoor.ErrNoTokenBytes) || errors.Is(err, constrain.ErrInvalid) {
		return nil, badParam(param, "%v", err)
	}
	return c, err
}

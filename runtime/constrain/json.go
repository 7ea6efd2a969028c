package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// object is a JSON object that keeps its keys in document order (property
// order matters: the output follows the schema's).
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// parseJSON decodes one JSON document into nil, bool, json.Number, string,
// []any and *object values.
func parseJSON(text []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("text after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (any, error) {
	if depth > 4*MaxNesting {
		return nil, fmt.Errorf("JSON nested deeper than %d", 4*MaxNesting)
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	return t, nil
}

// encodeJSON writes v compactly (object keys in their order), as the
// output would carry it.
func encodeJSON(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case *object:
		buf.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeJSON(buf, k)
			buf.WriteByte(':')
			encodeJSON(buf, v.vals[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeJSON(buf, e)
		}
		buf.WriteByte(']')
	case json.Number:
		buf.WriteString(string(v))
	default:
		e := json.NewEncoder(buf)
		e.SetEscapeHTML(false)
		_ = e.Encode(v)             // strings, bools and null always encode
		buf.Truncate(buf.Len() - 1) // Encode's newline
	}
}

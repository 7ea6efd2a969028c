package chat

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// tojsonFilter is the name the | tojson filter is renamed to in templates
// (see rewriteFilters): the engine's own tojson sorts the keys of objects
// when indent is given and ignores ensure_ascii and sort_keys, and the
// engine looks up a filter it does not have among the template's variables,
// where this package puts pyTojson.
const tojsonFilter = "__weft_tojson"

// pyTojson is Hugging Face's tojson filter: Python's
// json.dumps(value, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), each option settable by keyword. Object keys keep their
// order; with indent the separators default to ("," , ": ") and every item
// goes on its own line; floats print as Python's repr (1.0, 1e-05).
func pyTojson(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: no value")
	}
	o := jsonOpts{itemSep: ", ", keySep: ": "}
	for k, v := range kwargs {
		switch k {
		case "ensure_ascii":
			o.ascii = v.IsTruthy()
		case "sort_keys":
			o.sortKeys = v.IsTruthy()
		case "indent":
			switch {
			case v.IsNone() || v.IsUndefined():
			case v.IsInt():
				o.indent, o.hasIndent = strings.Repeat(" ", int(max(0, min(v.AsInt(), 64)))), true
			case v.IsString():
				o.indent, o.hasIndent = v.AsString(), true
			default:
				return jinja.Undefined(), fmt.Errorf("tojson: indent must be an integer or a string")
			}
		case "separators":
			if !v.IsNone() && !v.IsUndefined() {
				if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
					return jinja.Undefined(), fmt.Errorf("tojson: separators must be two strings")
				}
				o.sepsSet = true
				o.itemSep, o.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
			}
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: unsupported option %q", k)
		}
	}
	if len(args) > 1 { // tojson(indent) positionally, as Jinja's own filter allows
		if v := args[1]; v.IsInt() {
			o.indent, o.hasIndent = strings.Repeat(" ", int(max(0, min(v.AsInt(), 64)))), true
		}
	}
	if o.hasIndent && !o.sepsSet {
		o.itemSep = ","
	}
	var b strings.Builder
	if err := o.encode(&b, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

type jsonOpts struct {
	ascii, sortKeys    bool
	indent             string
	hasIndent, sepsSet bool
	itemSep, keySep    string
}

func (o *jsonOpts) newline(b *strings.Builder, level int) {
	if !o.hasIndent {
		return
	}
	b.WriteByte('\n')
	for range level {
		b.WriteString(o.indent)
	}
}

func (o *jsonOpts) encode(b *strings.Builder, v jinja.Value, level int) error {
	if level > maxJSONDepth {
		return fmt.Errorf("tojson: value nested more than %d deep", maxJSONDepth)
	}
	switch {
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		o.str(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, level+1)
			if err := o.encode(b, it, level+1); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.Keys
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if o.sortKeys {
			keys = slices.Sorted(slices.Values(keys))
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, level+1)
			o.str(b, k)
			b.WriteString(o.keySep)
			if err := o.encode(b, d.Data[k], level+1); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteByte('}')
	default: // none, undefined, callables
		b.WriteString("null")
	}
	return nil
}

// str writes s as Python's json module does: \" \\ \n \r \t \b \f, other
// control characters as \u00XX, and with ensure_ascii every non-ASCII
// character as \uXXXX (a surrogate pair above U+FFFF). Invalid UTF-8 bytes
// become U+FFFD.
func (o *jsonOpts) str(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	u := func(r rune) {
		b.WriteString(`\u`)
		b.WriteByte(hex[r>>12&15])
		b.WriteByte(hex[r>>8&15])
		b.WriteByte(hex[r>>4&15])
		b.WriteByte(hex[r&15])
	}
	b.WriteByte('"')
	for _, r := range s { // ranging over a string yields U+FFFD for invalid bytes
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			u(r)
		case r < 0x80 || !o.ascii:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			u(0xD800 + r>>10)
			u(0xDC00 + r&0x3FF)
		default:
			u(r)
		}
	}
	b.WriteByte('"')
}

// pyFloat formats f as Python's repr: the shortest digits that read back
// as f, positional between 1e-4 and 1e16 (with ".0" when integral),
// scientific otherwise ("1e-05", "1.5e+300"); NaN and infinities as
// json.dumps writes them.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	k := strings.LastIndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[k+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// strftimeNow is strftime_now(format) on the clock now: Python's strftime
// for the directives templates use (%Y %m %d %H %M %S %I %p %B %b %A %a %y
// %j %e, %-d and the other "-" no-padding forms, %%).
func strftimeNow(now func() time.Time) func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	return func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		format := "%Y-%m-%d"
		if len(args) > 0 {
			if !args[0].IsString() {
				return jinja.Undefined(), fmt.Errorf("strftime_now: the format must be a string")
			}
			format = args[0].AsString()
		}
		return jinja.NewString(strftime(now(), format)), nil
	}
}

func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		num := func(n, width int) {
			s := strconv.Itoa(n)
			for pad && len(s) < width {
				s = "0" + s
			}
			b.WriteString(s)
		}
		switch format[i] {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			num(t.Year()%100, 2)
		case 'm':
			num(int(t.Month()), 2)
		case 'd':
			num(t.Day(), 2)
		case 'e':
			s := strconv.Itoa(t.Day())
			if pad && len(s) < 2 {
				s = " " + s
			}
			b.WriteString(s)
		case 'j':
			num(t.YearDay(), 3)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'B':
			b.WriteString(t.Month().String())
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if !pad {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

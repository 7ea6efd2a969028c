package constrain

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
)

// CompileJSONSchema compiles a JSON Schema (the subset doc.go lists) into
// a grammar of the compact JSON texts that validate against it.
// Unsupported keywords are refused with an error naming them.
func CompileJSONSchema(schema string) (*Grammar, error) {
	if len(schema) > MaxSourceBytes {
		return nil, tooLargef("schema of %d bytes, at most %d", len(schema), MaxSourceBytes)
	}
	root, err := parseJSON([]byte(schema))
	if err != nil {
		return nil, invalidf("schema is not JSON: %v", err)
	}
	c := &schemaCompiler{b: &builder{}, root: root, refs: map[string]int32{}}
	seq, err := c.schema(root, "#", 0)
	if err != nil {
		return nil, err
	}
	return c.b.finish(seq)
}

// JSONObject returns the grammar of any compact JSON object.
func JSONObject() *Grammar {
	c := &schemaCompiler{b: &builder{}}
	g, err := c.b.finish(c.anyObject())
	if err != nil {
		panic("constrain: the JSON object grammar does not compile: " + err.Error())
	}
	return g
}

type schemaCompiler struct {
	b    *builder
	root any
	refs map[string]int32 // $ref target -> its rule, so recursion terminates

	value, object, str, chr, number []item // shared rules, made on first use
}

// annotations carry no constraint on the value; they are accepted and
// ignored.
var annotations = map[string]bool{
	"title": true, "description": true, "$schema": true, "$id": true, "$comment": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true,
}

// supported are the assertion keywords the compiler enforces.
var supported = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true, "enum": true, "const": true,
	"pattern": true, "minLength": true, "maxLength": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"anyOf": true, "oneOf": true, "$ref": true,
}

func (c *schemaCompiler) schema(s any, path string, depth int) ([]item, error) {
	if depth > MaxNesting {
		return nil, tooLargef("schema nested deeper than %d at %s", MaxNesting, path)
	}
	if c.b.err != nil {
		return nil, c.b.err
	}
	switch s := s.(type) {
	case bool:
		if s {
			return c.anyValue(), nil
		}
		return nil, invalidf("schema false at %s admits no value", path)
	case *object:
		return c.objectSchema(s, path, depth)
	}
	return nil, invalidf("schema at %s is not an object or a boolean", path)
}

func (c *schemaCompiler) objectSchema(s *object, path string, depth int) ([]item, error) {
	var bad, assertions []string
	for _, k := range s.keys {
		switch {
		case supported[k]:
			assertions = append(assertions, k)
		case !annotations[k]:
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		return nil, invalidf("unsupported schema keyword(s) %s at %s", strings.Join(bad, ", "), path)
	}
	only := func(k string) error {
		if len(assertions) > 1 {
			return invalidf("%s beside other keywords (%s) at %s is not supported", k, strings.Join(assertions, ", "), path)
		}
		return nil
	}
	if ref, ok := s.get("$ref"); ok {
		if err := only("$ref"); err != nil {
			return nil, err
		}
		r, ok := ref.(string)
		if !ok {
			return nil, invalidf("$ref at %s is not a string", path)
		}
		return c.ref(r, depth)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		if err := only(k); err != nil {
			return nil, err
		}
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return nil, invalidf("%s at %s must be a non-empty array", k, path)
		}
		alts := make([][]item, len(list))
		for i, sub := range list {
			seq, err := c.schema(sub, path+"/"+k+"/"+strconv.Itoa(i), depth+1)
			if err != nil {
				return nil, err
			}
			alts[i] = seq
		}
		return c.b.rule(alts...), nil
	}
	if v, ok := s.get("const"); ok {
		return c.literal(v), nil
	}
	if v, ok := s.get("enum"); ok {
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return nil, invalidf("enum at %s must be a non-empty array", path)
		}
		alts := make([][]item, len(list))
		for i, e := range list {
			alts[i] = c.literal(e)
		}
		return c.b.rule(alts...), nil
	}
	var types []string
	switch t := s.vals["type"].(type) {
	case nil:
		if _, has := s.vals["type"]; has {
			return nil, invalidf("type at %s is null", path)
		}
		types = []string{inferType(s)}
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			str, ok := e.(string)
			if !ok {
				return nil, invalidf("type at %s must be a string or an array of strings", path)
			}
			types = append(types, str)
		}
	default:
		return nil, invalidf("type at %s must be a string or an array of strings", path)
	}
	if len(types) == 0 {
		return nil, invalidf("type at %s is an empty array", path)
	}
	alts := make([][]item, len(types))
	for i, t := range types {
		seq, err := c.typed(t, s, path, depth)
		if err != nil {
			return nil, err
		}
		alts[i] = seq
	}
	return c.b.alt(alts...), nil
}

// inferType picks the type a schema without "type" describes by its
// keywords ("" when none: any value).
func inferType(s *object) string {
	for _, k := range s.keys {
		switch k {
		case "properties", "required", "additionalProperties":
			return "object"
		case "items", "minItems", "maxItems":
			return "array"
		case "pattern", "format", "minLength", "maxLength":
			return "string"
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			return "number"
		}
	}
	return ""
}

func (c *schemaCompiler) typed(t string, s *object, path string, depth int) ([]item, error) {
	switch t {
	case "":
		return c.anyValue(), nil
	case "null":
		return lit("null"), nil
	case "boolean":
		return c.b.rule(lit("true"), lit("false")), nil
	case "string":
		return c.stringSchema(s, path)
	case "integer", "number":
		return c.numberSchema(s, path, t == "integer")
	case "object":
		return c.objSchema(s, path, depth)
	case "array":
		return c.arraySchema(s, path, depth)
	}
	return nil, invalidf("unknown type %q at %s", t, path)
}

func (c *schemaCompiler) ref(r string, depth int) ([]item, error) {
	if rule, ok := c.refs[r]; ok {
		return []item{refItem(rule)}, nil
	}
	target, err := c.resolve(r)
	if err != nil {
		return nil, err
	}
	rule := c.b.newRule()
	c.refs[r] = rule
	seq, err := c.schema(target, r, depth+1)
	if err != nil {
		return nil, err
	}
	c.b.setAlts(rule, seq)
	return []item{refItem(rule)}, nil
}

// resolve follows a JSON pointer within the schema ("#", "#/$defs/x").
func (c *schemaCompiler) resolve(r string) (any, error) {
	if !strings.HasPrefix(r, "#") {
		return nil, invalidf("$ref %q: only references within the schema (#...) are supported", r)
	}
	frag, err := url.PathUnescape(r[1:])
	if err != nil {
		return nil, invalidf("$ref %q: %v", r, err)
	}
	cur := c.root
	if frag == "" {
		return cur, nil
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, invalidf("$ref %q: anchors are not supported, only JSON pointers", r)
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case *object:
			next, ok := v.get(tok)
			if !ok {
				return nil, invalidf("$ref %q: no %q", r, tok)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, invalidf("$ref %q: no index %q", r, tok)
			}
			cur = v[i]
		default:
			return nil, invalidf("$ref %q: %q is inside a scalar", r, tok)
		}
	}
	return cur, nil
}

func (c *schemaCompiler) literal(v any) []item {
	var buf bytes.Buffer
	encodeJSON(&buf, v)
	return lit(buf.String())
}

// count reads a non-negative integer keyword; def when absent.
func count(s *object, k, path string, def int) (int, error) {
	v, ok := s.get(k)
	if !ok {
		return def, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, invalidf("%s at %s is not a number", k, path)
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i < 0 {
		return 0, invalidf("%s at %s must be a non-negative integer", k, path)
	}
	if i > MaxRepeat {
		return 0, tooLargef("%s %d at %s is over %d", k, i, path, MaxRepeat)
	}
	return int(i), nil
}

// formats are the string formats the compiler produces, as regexes of the
// value. Each produces only valid values, not every valid value: dates
// stop at the 28th of February, times have no leap second, e-mail
// addresses are letters, digits and _+- around one @ with dotted host
// names.
var formats = map[string]string{
	"date":      dateRE,
	"time":      timeRE,
	"date-time": dateRE + "T" + timeRE,
	"uuid":      `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`,
	"email":     `[a-zA-Z0-9_+-]{1,32}(?:\.[a-zA-Z0-9_+-]{1,16})?@` + label + `(?:\.` + label + `){1,3}`,
}

const (
	dateRE = `[12][0-9]{3}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))`
	timeRE = `(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])`
	label  = `[a-z0-9](?:[a-z0-9-]{0,14}[a-z0-9])?`
)

func (c *schemaCompiler) stringSchema(s *object, path string) ([]item, error) {
	minLen, err := count(s, "minLength", path, 0)
	if err != nil {
		return nil, err
	}
	maxLen, err := count(s, "maxLength", path, -1)
	if err != nil {
		return nil, err
	}
	if _, ok := s.get("maxLength"); ok && maxLen < minLen {
		return nil, invalidf("maxLength below minLength at %s", path)
	}
	_, hasLen := s.get("minLength")
	if _, ok := s.get("maxLength"); ok {
		hasLen = true
	}
	pattern, hasPat := s.get("pattern")
	format, hasFmt := s.get("format")
	if (hasPat || hasFmt) && hasLen || hasPat && hasFmt {
		return nil, invalidf("pattern, format and minLength/maxLength cannot be combined at %s", path)
	}
	var expr string
	search := false
	switch {
	case hasFmt:
		f, _ := format.(string)
		re, ok := formats[f]
		if !ok {
			return nil, invalidf("unsupported string format %q at %s (supported: date, time, date-time, uuid, email)", f, path)
		}
		expr = re
	case hasPat:
		p, ok := pattern.(string)
		if !ok {
			return nil, invalidf("pattern at %s is not a string", path)
		}
		expr, search = p, true
	default:
		return cat(lit(`"`), c.b.repeat(c.char(), minLen, maxLen), lit(`"`)), c.b.err
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, invalidf("pattern at %s: %v", path, err)
	}
	re, begin, end := anchors(re)
	seq, err := c.b.regex(re, true, 0)
	if err != nil {
		return nil, err
	}
	// A pattern matches anywhere in the string unless anchored.
	if search && !begin {
		seq = cat(c.b.star(c.char()), seq)
	}
	if search && !end {
		seq = cat(seq, c.b.star(c.char()))
	}
	return cat(lit(`"`), seq, lit(`"`)), nil
}

// maxDigits bounds the digits of an integer without an upper bound, and of
// the integer part and the fraction of a number: 16 digits hold every
// integer up to 2^53, and a model that keeps writing zeros (small models
// do) still ends its number.
const maxDigits = 16

// maxBound is the largest magnitude of a numeric bound (beyond it float64
// no longer holds every integer).
const maxBound = 1 << 53

func (c *schemaCompiler) numberSchema(s *object, path string, integer bool) ([]item, error) {
	lo, hi := math.Inf(-1), math.Inf(1)
	loX, hiX := false, false
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			return nil, invalidf("%s at %s is not a number", k, path)
		}
		f, err := n.Float64()
		if err != nil || math.Abs(f) > maxBound {
			return nil, invalidf("%s %s at %s: bounds must be within ±2^53", k, n, path)
		}
		switch k {
		case "minimum":
			if f > lo || f == lo && loX {
				lo, loX = f, false
			}
		case "exclusiveMinimum":
			if f >= lo {
				lo, loX = f, true
			}
		case "maximum":
			if f < hi || f == hi && hiX {
				hi, hiX = f, false
			}
		case "exclusiveMaximum":
			if f <= hi {
				hi, hiX = f, true
			}
		}
	}
	// Integer bounds: the smallest and largest integers in range.
	ilo, ihi := math.Ceil(lo), math.Floor(hi)
	if loX && ilo == lo {
		ilo++
	}
	if hiX && ihi == hi {
		ihi--
	}
	bounded := !math.IsInf(lo, 0) || !math.IsInf(hi, 0)
	if !integer && !bounded {
		return c.anyNumber(), nil
	}
	var alts [][]item
	if ilo <= ihi {
		alts = append(alts, c.intRange(ilo, ihi))
	}
	if !integer {
		// Non-integers n.f with a non-zero fraction f: for n >= 0 the value
		// lies in (n, n+1), for n < 0 (written -k) in (-k-1, -k); keep the
		// integer parts whose whole interval is within the bounds.
		frac := cat(lit("."), c.b.repeat(digits('0', '9'), 0, maxDigits-1), digits('1', '9'))
		if pl, ph := math.Max(0, math.Ceil(lo)), math.Floor(hi)-1; pl <= ph {
			alts = append(alts, cat(c.intRange(pl, ph), frac))
		}
		if kl, kh := math.Max(1, math.Ceil(-hi)), math.Floor(-lo)-1; kl <= kh {
			alts = append(alts, cat(lit("-"), c.intRange(kl, kh), frac))
		}
	}
	if len(alts) == 0 {
		return nil, invalidf("no value this compiler writes lies within the bounds at %s", path)
	}
	return c.b.alt(alts...), nil
}

func digits(lo, hi byte) []item {
	var s byteSet
	s.addRange(lo, hi)
	return []item{byteItem(s)}
}

// intRange matches the decimal integers in [lo, hi] exactly (either may be
// infinite), written as JSON writes them: no leading zeros, no "-0".
func (c *schemaCompiler) intRange(lo, hi float64) []item {
	var alts [][]item
	if lo < 0 {
		// Negative part: "-" and a magnitude in [max(1, -hi), -lo].
		mlo := uint64(1)
		if hi < 0 {
			mlo = uint64(-hi)
		}
		alts = append(alts, cat(lit("-"), c.uintRange(mlo, -lo)))
	}
	if hi >= 0 {
		alts = append(alts, c.uintRange(uint64(math.Max(0, lo)), hi))
	}
	return c.b.alt(alts...)
}

// uintRange matches the integers in [lo, hi] (hi may be +Inf).
func (c *schemaCompiler) uintRange(lo uint64, hi float64) []item {
	ls := strconv.FormatUint(lo, 10)
	var alts [][]item
	if math.IsInf(hi, 1) {
		// Same length as lo and at least lo, or any longer number.
		alts = append(alts, c.sameLen(ls, strings.Repeat("9", len(ls))))
		if len(ls) < maxDigits {
			alts = append(alts, cat(digits('1', '9'), c.b.repeat(digits('0', '9'), len(ls), maxDigits-1)))
		}
		return c.b.alt(alts...)
	}
	hs := strconv.FormatUint(uint64(hi), 10)
	for n := len(ls); n <= len(hs); n++ {
		a, b := ls, hs
		if n > len(ls) {
			a = "1" + strings.Repeat("0", n-1)
		}
		if n < len(hs) {
			b = strings.Repeat("9", n)
		}
		alts = append(alts, c.sameLen(a, b))
	}
	return c.b.alt(alts...)
}

// sameLen matches the digit strings of len(a) between a and b (a <= b).
func (c *schemaCompiler) sameLen(a, b string) []item {
	if len(a) == 1 {
		return digits(a[0], b[0])
	}
	if a[0] == b[0] {
		return cat(lit(a[:1]), c.sameLen(a[1:], b[1:]))
	}
	rest := len(a) - 1
	free := func(lo, hi byte) []item { return cat(digits(lo, hi), c.b.repeat(digits('0', '9'), rest, rest)) }
	if strings.Trim(a[1:], "0") == "" && strings.Trim(b[1:], "9") == "" {
		return free(a[0], b[0])
	}
	var alts [][]item
	alts = append(alts, cat(lit(a[:1]), c.sameLen(a[1:], strings.Repeat("9", rest))))
	if a[0]+1 <= b[0]-1 {
		alts = append(alts, free(a[0]+1, b[0]-1))
	}
	alts = append(alts, cat(lit(b[:1]), c.sameLen(strings.Repeat("0", rest), b[1:])))
	return c.b.rule(alts...)
}

func (c *schemaCompiler) objSchema(s *object, path string, depth int) ([]item, error) {
	props, _ := s.vals["properties"].(*object)
	if _, ok := s.get("properties"); ok && props == nil {
		return nil, invalidf("properties at %s is not an object", path)
	}
	required := map[string]bool{}
	if v, ok := s.get("required"); ok {
		list, ok := v.([]any)
		if !ok {
			return nil, invalidf("required at %s is not an array", path)
		}
		for _, e := range list {
			name, ok := e.(string)
			if !ok {
				return nil, invalidf("required at %s holds a non-string", path)
			}
			if props == nil || !slices.Contains(props.keys, name) {
				return nil, invalidf("required property %q at %s is not among the properties", name, path)
			}
			required[name] = true
		}
	}
	closed := false
	switch ap := s.vals["additionalProperties"].(type) {
	case bool:
		closed = !ap
	case *object, nil:
	default:
		return nil, invalidf("additionalProperties at %s must be a boolean or a schema", path)
	}
	if props == nil || len(props.keys) == 0 {
		if closed {
			return lit("{}"), nil
		}
		return c.anyObject(), nil
	}
	// Properties come in schema order. tail(i, first) is the rest from
	// property i on, first telling whether nothing was written yet (no
	// comma needed).
	n := len(props.keys)
	kv := make([][]item, n)
	for i, k := range props.keys {
		seq, err := c.schema(props.vals[k], path+"/properties/"+k, depth+1)
		if err != nil {
			return nil, err
		}
		kv[i] = cat(c.literal(k), lit(":"), seq)
	}
	var tail [2][]item // tail(i+1, first=false), tail(i+1, first=true)
	for i := n - 1; i >= 0; i-- {
		var next [2][]item
		for f := range 2 {
			first := f == 1
			sep := lit(",")
			if first {
				sep = nil
			}
			with := cat(sep, kv[i], tail[0])
			if required[props.keys[i]] {
				next[f] = with
			} else {
				next[f] = c.b.rule(with, tail[f])
			}
		}
		tail = next
	}
	return cat(lit("{"), tail[1], lit("}")), c.b.err
}

func (c *schemaCompiler) arraySchema(s *object, path string, depth int) ([]item, error) {
	lo, err := count(s, "minItems", path, 0)
	if err != nil {
		return nil, err
	}
	hi, err := count(s, "maxItems", path, -1)
	if err != nil {
		return nil, err
	}
	if _, ok := s.get("maxItems"); ok && hi < lo {
		return nil, invalidf("maxItems below minItems at %s", path)
	}
	elem := c.anyValue()
	if it, ok := s.get("items"); ok {
		if elem, err = c.schema(it, path+"/items", depth+1); err != nil {
			return nil, err
		}
	}
	// The element gets its own rule so repetitions reference it once.
	elem = c.b.rule(elem)
	body := func(lo int) []item {
		return cat(elem, c.b.repeat(cat(lit(","), elem), max(lo-1, 0), max(hi-1, -1)))
	}
	switch {
	case hi == 0:
		return lit("[]"), nil
	case lo == 0:
		return cat(lit("["), c.b.opt(body(1)), lit("]")), c.b.err
	}
	return cat(lit("["), body(lo), lit("]")), c.b.err
}

// char is one character of a JSON string's text: an unescaped code point
// other than quote, backslash and controls, or an escape (\uXXXX outside
// the surrogates, so every escape is one code point).
func (c *schemaCompiler) char() []item {
	if c.chr == nil {
		hex := digitsOr("0123456789abcdefABCDEF")
		nonD := digitsOr("0123456789abcefABCEF")
		esc := cat(lit(`\`), c.b.rule(
			[]item{byteItem(setOf(`"\/bfnrt`))},
			cat(lit("u"), nonD, hex, hex, hex),
			cat(lit("u"), []item{byteItem(setOf("dD"))}, digits('0', '7'), hex, hex),
		))
		c.chr = c.b.rule(c.b.runeClass(jsonSafe), esc)
	}
	return c.chr
}

func setOf(s string) byteSet {
	var set byteSet
	for i := 0; i < len(s); i++ {
		set.add(s[i])
	}
	return set
}

func digitsOr(s string) []item { return []item{byteItem(setOf(s))} }

func (c *schemaCompiler) anyString() []item {
	if c.str == nil {
		c.str = c.b.rule(cat(lit(`"`), c.b.star(c.char()), lit(`"`)))
	}
	return c.str
}

// anyNumber is a JSON number of at most maxDigits integer and fraction
// digits; the exponent has at most two digits so every value stays a
// finite float64.
func (c *schemaCompiler) anyNumber() []item {
	if c.number == nil {
		intPart := c.b.rule(lit("0"), cat(digits('1', '9'), c.b.repeat(digits('0', '9'), 0, maxDigits-1)))
		frac := c.b.opt(cat(lit("."), c.b.repeat(digits('0', '9'), 1, maxDigits)))
		exp := c.b.opt(cat(digitsOr("eE"), c.b.opt(digitsOr("+-")), c.b.repeat(digits('0', '9'), 1, 2)))
		c.number = c.b.rule(cat(c.b.opt(lit("-")), intPart, frac, exp))
	}
	return c.number
}

// anyValue is any JSON value (recursive through objects and arrays).
func (c *schemaCompiler) anyValue() []item {
	if c.value == nil {
		r := c.b.newRule()
		c.value = []item{refItem(r)}
		arr := cat(lit("["), c.b.opt(cat(c.value, c.b.star(cat(lit(","), c.value)))), lit("]"))
		c.b.setAlts(r, c.anyObject(), arr, c.anyString(), c.anyNumber(), lit("true"), lit("false"), lit("null"))
	}
	return c.value
}

// anyObject is any JSON object.
func (c *schemaCompiler) anyObject() []item {
	if c.object == nil {
		r := c.b.newRule()
		c.object = []item{refItem(r)}
		member := cat(c.anyString(), lit(":"), c.anyValue())
		c.b.setAlts(r, cat(lit("{"), c.b.opt(cat(member, c.b.star(cat(lit(","), member)))), lit("}")))
	}
	return c.object
}

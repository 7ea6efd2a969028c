// Package constrain restricts generation to a formal language: a JSON
// Schema, a regular expression, a list of choices or a GBNF grammar. It
// compiles the constraint into a Grammar over bytes and turns grammar
// states into token masks over a model's vocabulary.
//
// # Automaton
//
// Every constraint compiles into one form: a context-free grammar whose
// terminals are byte sets, run as a pushdown automaton. A State is the set
// of parse stacks still alive (immutable frames shared between stacks,
// each stack with a byte element on top) plus whether the input so far is
// complete. Advance consumes one byte. Regular constraints (regexes,
// formats, integer ranges) are just grammars without recursion; $ref
// recursion and nested JSON become recursion in the grammar. Compilation
// refuses left recursion (and repetitions of something that can be
// empty), which would push frames without consuming input.
//
// # Masks
//
// A Vocab is the trie of the vocabulary's token byte strings (byte-fallback
// tokens are their byte; a multi-byte UTF-8 character split over tokens is
// just bytes to the automaton), built once per model. The mask of a state
// is computed by walking the trie from the state, advancing one byte per
// edge and pruning a subtree as soon as its prefix is dead, so a token
// spanning several grammar terminals costs nothing special. A Constraint
// (a Grammar over a Vocab) caches masks by the canonical key of the state,
// shared by all sequences using it: a state reached again (the inside of a
// string, the same property at the same nesting) costs one map lookup.
// End-of-generation tokens are allowed exactly when the state accepts;
// other tokens without bytes (control tokens) never are.
//
// # Output form
//
// JSON is written compactly: no whitespace anywhere, properties in the
// schema's order, required ones always, optional ones maybe, and no
// properties beyond those listed (so additionalProperties true or a
// schema never adds any; the output is still valid). Strings may hold any
// code point except controls unescaped, and escapes \" \\ \/ \b \f \n \r
// \t and \uXXXX outside the surrogates, so minLength/maxLength count code
// points exactly. Integers and the integer part and fraction of numbers
// have at most 16 digits (every integer up to 2^53; a small model that
// keeps writing zeros still ends its number), exponents at most two.
//
// # JSON Schema subset
//
// type (one or a list); null; boolean; integer and number with minimum,
// maximum, exclusiveMinimum, exclusiveMaximum; string with minLength,
// maxLength, pattern (RE2, unanchored unless ^/$, characters needing
// escapes left out of classes), format date, time, date-time, uuid, email
// (each produces valid values only; see formats); enum and const of any
// JSON values; object with properties, required, additionalProperties;
// array with items, minItems, maxItems; anyOf; oneOf (compiled as anyOf:
// the alternatives should not overlap); $ref to "#" or a JSON pointer
// within the schema ($defs, definitions), recursion included. Annotations
// (title, description, default, examples, ...) are ignored; any other
// keyword is an error naming it. A bare "type":"object" is any object, a
// schema without type or keywords any value.
//
// Bounds: integer bounds are exact (the output is every integer in the
// range, as a digit automaton; a range open above stops at 16 digits). Numbers with bounds are an integer in
// range, or n.f with a non-zero fraction where the whole interval (n, n+1)
// (or (-k-1, -k) for a negative integer part) lies within the bounds: a
// subset of the values in range, never a value outside. Bounds must lie
// within ±2^53.
//
// # Limits
//
// MaxSourceBytes, MaxItems, MaxNesting and MaxRepeat bound compilation
// (errors wrap ErrTooLarge, itself wrapping ErrInvalid); MaxStackDepth and
// MaxStacks bound a running state.
//
// Example:
//
//	g, err := constrain.CompileJSONSchema(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
//	if err != nil {
//		return err // errors.Is(err, constrain.ErrInvalid)
//	}
//	c := constrain.NewConstraint(g, vocab, pieces)
//	seq := c.Start()
//	mask := seq.Allowed() // bit t set: token t may come next
//	err = seq.Accept(tok)
package constrain

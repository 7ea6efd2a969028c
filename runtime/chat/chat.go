package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Message is one turn of a conversation. Templates see it as a dict with
// Hugging Face's keys: role and content always, the others when set.
type Message struct {
	Role    string // "system", "user", "assistant", "tool" (templates may accept others)
	Content string
	// ReasoningContent is an assistant's reasoning ("reasoning_content"),
	// which thinking models' templates replay or drop.
	ReasoningContent string
	// ToolCalls are the function calls of an assistant message
	// ("tool_calls").
	ToolCalls []ToolCall
	// ToolCallID is, in a "tool" message, the id of the call it answers
	// ("tool_call_id").
	ToolCallID string
	// Name is the function name of a "tool" message ("name").
	Name string
}

// Errors returned by this package wrap one of these sentinels (with %w).
var (
	// ErrInvalidTemplate: the template source is too large or does not
	// parse. It is a property of the model, not of a request.
	ErrInvalidTemplate = errors.New("invalid chat template")
	// ErrRejected: the template called raise_exception, i.e. it refuses
	// this conversation (for example "Conversation roles must alternate
	// user/assistant/user/assistant/..."). The error is a *RejectedError
	// carrying the template's message; the server maps it to
	// InvalidArgument.
	ErrRejected = errors.New("chat template rejected the conversation")
	// ErrLimit: rendering ran past Limits (steps, time or output size).
	ErrLimit = errors.New("chat template exceeded its limits")
	// ErrRender: any other failure while rendering (an engine error or
	// panic).
	ErrRender = errors.New("chat template failed to render")
)

// RejectedError is the error of a template's raise_exception call. It wraps
// ErrRejected.
type RejectedError struct {
	Message string // the template's own message
}

func (e *RejectedError) Error() string { return ErrRejected.Error() + ": " + e.Message }

// Unwrap makes errors.Is(err, ErrRejected) hold.
func (e *RejectedError) Unwrap() error { return ErrRejected }

// Limits bound what one template may cost. Zero fields take the defaults.
type Limits struct {
	// MaxSourceBytes is the largest template source New accepts (default
	// 512 KiB; the largest real templates are around 40 KiB).
	MaxSourceBytes int
	// MaxOutputBytes is the largest rendered prompt (default 8 MiB).
	MaxOutputBytes int
	// MaxSteps bounds loop iterations plus macro calls in one render
	// (default 50000). It also bounds macro recursion depth, which keeps a
	// recursive template far from the Go stack limit.
	MaxSteps int
	// MaxRange is the largest list range() may build (default 10000).
	MaxRange int
	// Timeout bounds the wall-clock time of one render (default 1s). It is
	// checked at every step.
	Timeout time.Duration
}

// Default limits.
const (
	DefaultMaxSourceBytes = 512 << 10
	DefaultMaxOutputBytes = 8 << 20
	DefaultMaxSteps       = 50_000
	DefaultMaxRange       = 10_000
	DefaultTimeout        = time.Second
)

// validate fills defaults and rejects negative values.
func (l *Limits) validate() error {
	if l.MaxSourceBytes < 0 || l.MaxOutputBytes < 0 || l.MaxSteps < 0 || l.MaxRange < 0 || l.Timeout < 0 {
		return fmt.Errorf("chat: negative limit in %+v", *l)
	}
	if l.MaxSourceBytes == 0 {
		l.MaxSourceBytes = DefaultMaxSourceBytes
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxRange == 0 {
		l.MaxRange = DefaultMaxRange
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	return nil
}

// Config describes a template to compile.
type Config struct {
	// Source is the Jinja source, as in the GGUF key tokenizer.chat_template
	// or Hugging Face's tokenizer_config.json "chat_template".
	Source string
	// BOSToken and EOSToken are the texts of the model's BOS and EOS
	// tokens, exposed to the template as bos_token and eos_token.
	BOSToken, EOSToken string
	// Name is a label for errors and logs (default "model").
	Name string
	// Limits bound the cost of rendering.
	Limits Limits
}

func (c *Config) validate() error {
	if c.Name == "" {
		c.Name = "model"
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	if len(c.Source) > c.Limits.MaxSourceBytes {
		return fmt.Errorf("%w %s: source is %d bytes, more than the limit %d",
			ErrInvalidTemplate, c.Name, len(c.Source), c.Limits.MaxSourceBytes)
	}
	return nil
}

// Template is a compiled chat template. It is immutable and safe for
// concurrent use.
type Template struct {
	cfg  Config
	tmpl *jinja.Template
}

// New compiles a chat template with the default limits. bosToken and
// eosToken are the texts of the model's BOS and EOS tokens.
func New(source, bosToken, eosToken string) (*Template, error) {
	return Compile(Config{Source: source, BOSToken: bosToken, EOSToken: eosToken})
}

// Compile compiles a chat template. The source is parsed once here; a
// failure (or a panic in the engine) is returned as an error wrapping
// ErrInvalidTemplate.
func Compile(cfg Config) (t *Template, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("%w %s: engine panic while parsing: %v", ErrInvalidTemplate, cfg.Name, r)
		}
	}()
	if err := checkCycles(cfg.Source); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidTemplate, cfg.Name, err)
	}
	if err := checkSupported(cfg.Source); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidTemplate, cfg.Name, err)
	}
	tmpl, err := jinja.Compile(instrument(rewriteFilters(cfg.Source)))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidTemplate, cfg.Name, err)
	}
	return &Template{cfg: cfg, tmpl: tmpl}, nil
}

// Source returns the template source as given (without the step checks
// Compile inserts).
func (t *Template) Source() string { return t.cfg.Source }

// Name returns the template's label (Config.Name, or the fallback's name).
func (t *Template) Name() string { return t.cfg.Name }

// Render formats msgs into the prompt text the model expects. With
// addGenerationPrompt the template appends the header that starts the
// assistant's reply (add_generation_prompt in Hugging Face). It is
// RenderVars with no Vars.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.RenderVars(msgs, addGenerationPrompt, Vars{})
}

// RenderVars is Render with the template variables of v as well.
//
// The template sees, as Hugging Face's apply_chat_template provides them:
// messages (a list of dicts, see Message), add_generation_prompt,
// bos_token, eos_token, raise_exception, strftime_now (on v.Now), the set
// fields of v (tools, enable_thinking, reasoning_effort, builtin_tools,
// date_string, v.Extra) and the engine's globals (namespace, range, ...);
// documents and unset variables are undefined. Message contents are data:
// template syntax inside them is never evaluated.
//
// RenderVars never panics. Its errors wrap ErrBadInput (v or a tool call
// cannot be given to the template), ErrRejected (raise_exception), ErrLimit
// or ErrRender.
func (t *Template) RenderVars(msgs []Message, addGenerationPrompt bool, v Vars) (out string, err error) {
	lim := t.cfg.Limits
	deadline := time.Now().Add(lim.Timeout)
	steps := 0
	var limitErr error // set when a limit stops the render, so that it is reported even if the engine rewraps the error

	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		if list[i], err = messageValue(m); err != nil {
			return "", err
		}
	}
	now := time.Now
	if !v.Now.IsZero() {
		now = func() time.Time { return v.Now }
	}
	data := map[string]jinja.Value{
		tojsonFilter:            jinja.NewCallable("tojson", pyTojson),
		"strftime_now":          jinja.NewCallable("strftime_now", strftimeNow(now)),
		"messages":              jinja.NewList(list),
		"add_generation_prompt": jinja.NewBool(addGenerationPrompt),
		"bos_token":             jinja.NewString(t.cfg.BOSToken),
		"eos_token":             jinja.NewString(t.cfg.EOSToken),
		"raise_exception": jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			msg := "raise_exception called"
			if len(args) > 0 {
				if args[0].IsString() {
					msg = args[0].AsString()
				} else {
					msg = args[0].String()
				}
			}
			return jinja.Undefined(), &RejectedError{Message: msg}
		}),
		"range": jinja.NewCallable("range", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			return boundedRange(args, lim.MaxRange)
		}),
		stepFunc: jinja.NewCallable(stepFunc, func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
			steps++
			switch {
			case steps > lim.MaxSteps:
				limitErr = fmt.Errorf("%w: more than %d loop iterations and macro calls", ErrLimit, lim.MaxSteps)
				return jinja.Undefined(), limitErr
			case steps%64 == 0 && time.Now().After(deadline):
				limitErr = fmt.Errorf("%w: rendering took longer than %v", ErrLimit, lim.Timeout)
				return jinja.Undefined(), limitErr
			}
			return jinja.NewBool(false), nil
		}),
	}

	if err := v.addVars(data); err != nil {
		return "", err
	}

	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%w %s: engine panic: %v", ErrRender, t.cfg.Name, r)
		}
	}()
	out, err = t.tmpl.RenderValues(data)
	switch {
	case limitErr != nil:
		return "", fmt.Errorf("%s: %w", t.cfg.Name, limitErr)
	case err != nil:
		var rej *RejectedError
		if errors.As(err, &rej) {
			return "", rej
		}
		if strings.Contains(err.Error(), ErrRejected.Error()) {
			// The engine flattened the error (%v); keep the category.
			return "", fmt.Errorf("%w: %s", ErrRejected, err.Error())
		}
		return "", fmt.Errorf("%w %s: %w", ErrRender, t.cfg.Name, err)
	case len(out) > lim.MaxOutputBytes:
		return "", fmt.Errorf("%w: %s rendered %d bytes, more than %d", ErrLimit, t.cfg.Name, len(out), lim.MaxOutputBytes)
	}
	return out, nil
}

// boundedRange is Jinja's range(), refusing to build more than max items
// (Jinja's own sandbox caps range at 100000).
func boundedRange(args []jinja.Value, max int) (jinja.Value, error) {
	var start, stop, step int64 = 0, 0, 1
	ints := make([]int64, len(args))
	for i, a := range args {
		if !a.IsInt() {
			return jinja.Undefined(), fmt.Errorf("range: argument %d is not an integer", i+1)
		}
		ints[i] = a.AsInt()
	}
	switch len(ints) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	default:
		return jinja.Undefined(), fmt.Errorf("range: expected 1 to 3 arguments, got %d", len(args))
	}
	if step == 0 {
		return jinja.Undefined(), errors.New("range: step must not be zero")
	}
	// Count the items in uint64: the differences may not fit in an int64.
	var n uint64
	if step > 0 && stop > start {
		n = (uint64(stop)-uint64(start)-1)/uint64(step) + 1
	} else if step < 0 && stop < start {
		n = (uint64(start)-uint64(stop)-1)/(uint64(-(step+1))+1) + 1
	}
	if n > uint64(max) {
		return jinja.Undefined(), fmt.Errorf("%w: range of %d items, more than %d", ErrLimit, n, max)
	}
	items := make([]jinja.Value, n)
	for i := range items {
		items[i] = jinja.NewInt(start + int64(i)*step)
	}
	return jinja.NewList(items), nil
}

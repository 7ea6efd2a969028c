package runtime

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/runtime/tokenizer"
)

// Model is a loaded model: weights, tokenizer, chat template and metadata.
// The weights point into the GGUF mapping, so the Model (and every backend
// built on it) is valid until Close.
type Model struct {
	// Name is general.name (or the file's base name).
	Name string
	// Path is the file loaded, or "builtin:weft-tiny" for the built-in model.
	Path string
	// Synthetic is true for the built-in random-weight model.
	Synthetic bool
	// HP are the hyper-parameters.
	HP llama.HParams
	// LM holds the weights.
	LM *llama.Model
	// Tok is the tokenizer.
	Tok *tokenizer.Tokenizer
	// ChatTemplate is tokenizer.chat_template ("" when the file has none).
	ChatTemplate string
	// Template is the file's compiled chat template: nil when the file has
	// none, or when it does not compile (then TemplateErr says why). What
	// Chat renders with then is the operator's choice (weft serve
	// --chat-template), not the runtime's.
	Template    *chat.Template
	TemplateErr error
	// TensorTypes counts the tensors of each type ("Q4_K": 97).
	TensorTypes map[string]int
	// Pooling is how the file says embeddings pool the tokens' hidden
	// states (<arch>.pooling_type: mean, cls or last), PoolingUnset when
	// it has no such key or names none of those; PoolingType is the key's
	// raw value (-1 when absent), for the operator's log.
	Pooling     batch.Pooling
	PoolingType int64
	// File is the parsed GGUF; Close unmaps it.
	File *gguf.File

	closeOnce sync.Once
	closeErr  error
}

// TypeSummary renders TensorTypes as "F32:65 Q4_K:97", most common first.
func (m *Model) TypeSummary() string {
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range m.TensorTypes {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].k < all[j].k
	})
	parts := make([]string, len(all))
	for i, e := range all {
		parts[i] = fmt.Sprintf("%s:%d", e.k, e.n)
	}
	return strings.Join(parts, " ")
}

// Load opens and memory-maps a GGUF model file and builds its weights and
// tokenizer. Unsupported architectures and tensor types are refused.
func Load(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	m, err := fromFile(f, path)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return m, nil
}

func fromFile(f *gguf.File, path string) (*Model, error) {
	lm, err := llama.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if tok.VocabSize() > lm.HP.VocabSize {
		return nil, fmt.Errorf("tokenizer has %d tokens but the model only %d embeddings", tok.VocabSize(), lm.HP.VocabSize)
	}
	m := &Model{Path: path, HP: lm.HP, LM: lm, Tok: tok, File: f, TensorTypes: map[string]int{}}
	m.Name, _ = f.String("general.name")
	if m.Name == "" {
		base := path[strings.LastIndexAny(path, `/\`)+1:]
		m.Name = strings.TrimSuffix(base, ".gguf")
	}
	m.PoolingType = -1
	if v, ok := f.Int(f.Arch() + ".pooling_type"); ok {
		m.PoolingType = v
		m.Pooling, _ = batch.PoolingOfType(v)
	}
	m.ChatTemplate, _ = f.String("tokenizer.chat_template")
	if strings.TrimSpace(m.ChatTemplate) != "" {
		m.Template, m.TemplateErr = m.CompileTemplate(m.ChatTemplate)
	}
	for _, t := range f.Tensors {
		m.TensorTypes[t.Type.String()]++
	}
	return m, nil
}

// CompileTemplate compiles a chat template for this model: Jinja source
// whose bos_token and eos_token are the texts of the tokenizer's BOS and
// EOS tokens (the model's own template, or an operator's file).
func (m *Model) CompileTemplate(source string) (*chat.Template, error) {
	var bos, eos string
	if id := m.Tok.BOS(); id >= 0 {
		bos = m.Tok.Piece(id)
	}
	if id := m.Tok.EOS(); id >= 0 {
		eos = m.Tok.Piece(id)
	}
	return chat.New(source, bos, eos)
}

// Close releases the file mapping. The model and its backends must not be
// used afterwards.
func (m *Model) Close() error {
	m.closeOnce.Do(func() {
		if m.File != nil {
			m.closeErr = m.File.Close()
		}
	})
	return m.closeErr
}

// WeightsToMemory moves the model file's bytes out of its read-only file
// mapping into private anonymous memory at the same addresses, in
// transparent huge pages where the kernel grants them
// ([gguf.File.ToMemory]): the weights (and every backend built on them)
// stay valid. Call it before the model serves. The built-in model is in
// memory already: nothing is copied.
func (m *Model) WeightsToMemory() (gguf.Placement, error) {
	return m.File.ToMemory()
}

// NewCPUBackend returns a CPU backend for the model (cpu.New on its weights).
func (m *Model) NewCPUBackend(cfg cpu.Config) (*cpu.Backend, error) {
	return cpu.New(m.LM, cfg)
}

var _ batch.Backend = (*cpu.Backend)(nil)

// DefaultModelName is the name of the built-in model.
const DefaultModelName = "weft-tiny"

// DefaultModelNotice is what to log when the built-in model is served.
const DefaultModelNotice = "built-in synthetic model weft-tiny (random weights, NOT a trained model); " +
	"pass --model PATH.gguf to serve a real model"

// LoadDefault builds the built-in model weft-tiny: a small random-weight
// llama (64 wide, 2 layers, 4 heads / 2 KV heads, generated 512-token
// byte-fallback vocabulary, a simple chat template) generated
// deterministically in memory, written as GGUF and loaded through the same
// parser as a file. Its output is gibberish; it exists so weft runs with
// nothing downloaded. Callers should log DefaultModelNotice.
func LoadDefault() (*Model, error) {
	cfg, err := llama.Preset("tiny")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := llama.Generate(cfg, &buf); err != nil {
		return nil, fmt.Errorf("built-in model: %w", err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("built-in model: %w", err)
	}
	m, err := fromFile(f, "builtin:"+DefaultModelName)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("built-in model: %w", err)
	}
	m.Synthetic = true
	return m, nil
}

package llama

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// ErrUnsupported is wrapped by load errors for architectures, tensor types or
// hyper-parameters weft cannot run.
var ErrUnsupported = errors.New("llama: unsupported model")

// supportedTypes are the weight types the CPU backend can multiply.
var supportedTypes = map[gguf.Type]bool{
	gguf.TypeF32: true, gguf.TypeF16: true, gguf.TypeBF16: true,
	gguf.TypeQ4_0: true, gguf.TypeQ4_1: true, gguf.TypeQ5_0: true, gguf.TypeQ5_1: true,
	gguf.TypeQ8_0: true,
	gguf.TypeQ2_K: true, gguf.TypeQ3_K: true, gguf.TypeQ4_K: true, gguf.TypeQ5_K: true, gguf.TypeQ6_K: true,
	gguf.TypeIQ4_NL: true, gguf.TypeIQ4_XS: true, gguf.TypeMXFP4: true,
}

// archSpec is what an architecture adds to the llama block; ReadHParams
// and FromGGUF turn it into HParams and Layer fields.
type archSpec struct {
	neox      bool    // NEOX rotation
	eps       float32 // RMS norm epsilon when the key is absent
	biases    bool    // QKV biases required (qwen2)
	qkNorm    bool    // per-head q/k RMS norms required (qwen3, gemma3)
	postNorms bool    // post-attention and post-FFN norms required (gemma3)
	moe       bool    // the FFN is a mixture of experts (qwen3moe, gpt-oss)
	// oai is gpt-oss's block: Q/K/V and output biases, attention sinks,
	// post_attention_norm as the pre-FFN norm, router and expert biases,
	// top-k-then-softmax gating and the clamped SwiGLU.
	oai bool
	// gemma: the embedding scaled by sqrt(n_embd), q (not the scores)
	// scaled, GELU(tanh), optional final logit softcapping.
	gemma bool
	// swaPattern, when not 0, is the default period of sliding layers
	// (attention.sliding_window_pattern absent): layer i slides unless
	// i%swaPattern == swaPattern-1 (llama.cpp's gemma3: 6, gpt-oss: 2). 0:
	// the architecture has no sliding windows. swaBase10k gives the
	// sliding layers the rotary base 10000 by default (gemma3) rather than
	// rope.freq_base (gpt-oss).
	swaPattern int
	swaBase10k bool
}

var archs = map[string]archSpec{
	"llama":  {eps: 1e-5},
	"qwen2":  {neox: true, eps: 1e-6, biases: true},
	"qwen3":  {neox: true, eps: 1e-6, qkNorm: true},
	"gemma3": {neox: true, eps: 1e-6, qkNorm: true, postNorms: true, gemma: true, swaPattern: 6, swaBase10k: true},
	// llama.cpp requires the epsilon key of both MoE archs; the default
	// here is what their converters write.
	"qwen3moe": {neox: true, eps: 1e-6, qkNorm: true, moe: true},
	"gpt-oss":  {neox: true, eps: 1e-5, biases: true, moe: true, oai: true, swaPattern: 2},
}

// ReadHParams reads the hyper-parameters of a llama, qwen2, qwen3 or gemma3
// GGUF.
func ReadHParams(f *gguf.File) (HParams, error) {
	var hp HParams
	arch := f.Arch()
	spec, ok := archs[arch]
	switch {
	case arch == "":
		return hp, fmt.Errorf("%w: general.architecture is missing", ErrUnsupported)
	case !ok:
		return hp, fmt.Errorf("%w: architecture %q (weft runs llama, qwen2, qwen3, gemma3, qwen3moe and gpt-oss)", ErrUnsupported, arch)
	}
	hp.Arch = arch
	hp.RopeNeox = spec.neox
	req := func(key string) (int, error) {
		v, ok := f.Uint(arch + "." + key)
		if !ok {
			return 0, fmt.Errorf("llama: missing or invalid GGUF key %s.%s", arch, key)
		}
		if v == 0 || v > 1<<24 {
			return 0, fmt.Errorf("llama: GGUF key %s.%s = %d out of range", arch, key, v)
		}
		return int(v), nil
	}
	var err error
	if hp.Dim, err = req("embedding_length"); err != nil {
		return hp, err
	}
	if hp.Layers, err = req("block_count"); err != nil {
		return hp, err
	}
	if hp.FFN, err = req("feed_forward_length"); err != nil {
		return hp, err
	}
	if hp.Heads, err = req("attention.head_count"); err != nil {
		return hp, err
	}
	hp.KVHeads = hp.Heads
	if _, ok := f.Get(arch + ".attention.head_count_kv"); ok {
		if hp.KVHeads, err = req("attention.head_count_kv"); err != nil {
			return hp, err
		}
	}
	hp.ContextLen = 2048
	if _, ok := f.Get(arch + ".context_length"); ok {
		if hp.ContextLen, err = req("context_length"); err != nil {
			return hp, err
		}
	}
	if _, ok := f.Get(arch + ".attention.key_length"); ok {
		// The head dimension is its own key (qwen3, gemma3): n_head x
		// head_dim need not be n_embd.
		if hp.HeadDim, err = req("attention.key_length"); err != nil {
			return hp, err
		}
		if vl, ok := f.Uint(arch + ".attention.value_length"); ok && int(vl) != hp.HeadDim {
			return hp, fmt.Errorf("%w: key_length %d != value_length %d", ErrUnsupported, hp.HeadDim, vl)
		}
	} else {
		if hp.Dim%hp.Heads != 0 {
			return hp, fmt.Errorf("llama: embedding_length %d not divisible by head_count %d", hp.Dim, hp.Heads)
		}
		hp.HeadDim = hp.Dim / hp.Heads
	}
	if hp.Heads%hp.KVHeads != 0 {
		return hp, fmt.Errorf("llama: head_count %d not a multiple of head_count_kv %d", hp.Heads, hp.KVHeads)
	}
	if hp.HeadDim%2 != 0 {
		return hp, fmt.Errorf("llama: head dimension %d is odd", hp.HeadDim)
	}
	if rd, ok := f.Uint(arch + ".rope.dimension_count"); ok && int(rd) != hp.HeadDim {
		return hp, fmt.Errorf("%w: partial rotary embedding (rope.dimension_count %d, head dim %d)", ErrUnsupported, rd, hp.HeadDim)
	}
	// The softmax scale as llama.cpp computes it: 1.0f/sqrtf(head_dim).
	hp.AttnScale = 1 / float32(math.Sqrt(float64(hp.HeadDim)))
	if spec.gemma {
		// Gemma scales q instead, by 1/sqrt(key_length), except the
		// 62-layer model (Gemma 3 27B), which uses 1/sqrt(n_embd/n_head).
		hp.QScale = hp.AttnScale
		if hp.Layers == 62 {
			hp.QScale = 1 / float32(math.Sqrt(float64(hp.Dim/hp.Heads)))
		}
		hp.AttnScale = 1
		hp.EmbedScale = float32(math.Sqrt(float64(hp.Dim)))
		hp.Act = ActGELUTanh
		if v, ok := f.Float(arch + ".final_logit_softcapping"); ok {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return hp, fmt.Errorf("llama: GGUF key %s.final_logit_softcapping = %g out of range", arch, v)
			}
			hp.FinalSoftcap = float32(v)
		}
	}
	hp.RopeBase = 10000
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		hp.RopeBase = float32(v)
	}
	hp.NormEps = spec.eps
	if v, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		hp.NormEps = float32(v)
	}
	if st, ok := f.String(arch + ".rope.scaling.type"); ok && st != "none" {
		switch st {
		case "llama3":
			sc := &Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContextLen: 8192}
			if v, ok := f.Float(arch + ".rope.scaling.factor"); ok {
				sc.Factor = float32(v)
			}
			if v, ok := f.Float(arch + ".rope.scaling.low_freq_factor"); ok {
				sc.LowFreqFactor = float32(v)
			}
			if v, ok := f.Float(arch + ".rope.scaling.high_freq_factor"); ok {
				sc.HighFreqFactor = float32(v)
			}
			if v, ok := f.Uint(arch + ".rope.scaling.original_context_length"); ok {
				sc.OrigContextLen = int(v)
			}
			hp.RopeScaling = sc
		case "yarn":
			if hp.Yarn, err = readYaRN(f, arch, hp.ContextLen); err != nil {
				return hp, err
			}
		default:
			return hp, fmt.Errorf("%w: rope scaling type %q", ErrUnsupported, st)
		}
	}
	if spec.moe {
		if err := readMoEParams(f, &hp); err != nil {
			return hp, err
		}
		hp.MoE.Gating, hp.MoE.Norm = GatingSoftmax, true
		if spec.oai {
			hp.MoE.Gating, hp.MoE.Norm = GatingTopKSoftmax, false
			hp.MoE.SwiGLUAlpha, hp.MoE.SwiGLULimit = swigluOAIAlpha, swigluOAILimit
		}
	}
	// The embedding's row count is the model's vocabulary (it may exceed
	// the tokenizer's when padded); the metadata is a fallback.
	if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 && t.Dims[1] < 1<<24 {
		hp.VocabSize = int(t.Dims[1])
	} else if v, ok := f.Uint(arch + ".vocab_size"); ok && v < 1<<24 {
		hp.VocabSize = int(v)
	} else if toks, ok := f.Strings("tokenizer.ggml.tokens"); ok {
		hp.VocabSize = len(toks)
	}
	if hp.VocabSize <= 0 {
		return hp, fmt.Errorf("llama: cannot determine the vocabulary size")
	}
	return hp, nil
}

// FromGGUF builds a Model over f's tensors. Weight data is not copied: the
// Model is valid as long as f is open. Every tensor's shape is checked
// against the hyper-parameters.
func FromGGUF(f *gguf.File) (*Model, error) {
	hp, err := ReadHParams(f)
	if err != nil {
		return nil, err
	}
	spec := archs[hp.Arch]
	windows, bases, err := layerAttention(f, hp)
	if err != nil {
		return nil, err
	}
	m := &Model{HP: hp}
	used := map[string]bool{}
	weight := func(name string, cols, rows int) (quant.Weight, error) {
		t, ok := f.Tensor(name)
		if !ok {
			return quant.Weight{}, fmt.Errorf("llama: tensor %s is missing", name)
		}
		used[name] = true
		if len(t.Dims) != 2 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(rows) {
			return quant.Weight{}, fmt.Errorf("llama: tensor %s has shape %v, want [%d %d]", name, t.Dims, cols, rows)
		}
		if !supportedTypes[t.Type] || !quant.Supported(t.Type) {
			return quant.Weight{}, fmt.Errorf("%w: tensor %s has type %s", ErrUnsupported, name, t.Type)
		}
		rb, err := t.Type.RowBytes(cols)
		if err != nil {
			return quant.Weight{}, fmt.Errorf("llama: tensor %s: %w", name, err)
		}
		if len(t.Data) != rb*rows {
			return quant.Weight{}, fmt.Errorf("llama: tensor %s has %d bytes, want %d", name, len(t.Data), rb*rows)
		}
		return quant.Weight{Type: t.Type, Rows: rows, Cols: cols, Data: t.Data}, nil
	}
	vector := func(name string, n int, optional bool) ([]float32, error) {
		t, ok := f.Tensor(name)
		if !ok {
			if optional {
				return nil, nil
			}
			return nil, fmt.Errorf("llama: tensor %s is missing", name)
		}
		used[name] = true
		if len(t.Dims) != 1 || t.Dims[0] != uint64(n) {
			return nil, fmt.Errorf("llama: tensor %s has shape %v, want [%d]", name, t.Dims, n)
		}
		return floatVector(name, t.Type, t.Data, n)
	}
	qDim, kvDim := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	if m.TokEmbd, err = weight("token_embd.weight", hp.Dim, hp.VocabSize); err != nil {
		return nil, err
	}
	if m.OutNorm, err = vector("output_norm.weight", hp.Dim, false); err != nil {
		return nil, err
	}
	if _, ok := f.Tensor("output.weight"); ok {
		if m.Output, err = weight("output.weight", hp.Dim, hp.VocabSize); err != nil {
			return nil, err
		}
	} else {
		m.Output = m.TokEmbd
	}
	m.Layers = make([]Layer, hp.Layers)
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		steps := []struct {
			dst        *quant.Weight
			name       string
			cols, rows int
		}{
			{&l.Wq, "attn_q.weight", hp.Dim, qDim},
			{&l.Wk, "attn_k.weight", hp.Dim, kvDim},
			{&l.Wv, "attn_v.weight", hp.Dim, kvDim},
			{&l.Wo, "attn_output.weight", qDim, hp.Dim},
			{&l.WGate, "ffn_gate.weight", hp.Dim, hp.FFN},
			{&l.WUp, "ffn_up.weight", hp.Dim, hp.FFN},
			{&l.WDown, "ffn_down.weight", hp.FFN, hp.Dim},
		}
		if spec.moe {
			steps = steps[:4]
			if l.MoE, err = loadMoELayer(f, hp, p, spec.oai, used, weight, vector); err != nil {
				return nil, err
			}
		}
		for _, s := range steps {
			if *s.dst, err = weight(p+s.name, s.cols, s.rows); err != nil {
				return nil, err
			}
		}
		if l.AttnNorm, err = vector(p+"attn_norm.weight", hp.Dim, false); err != nil {
			return nil, err
		}
		// gpt-oss's pre-FFN norm is named post_attention_norm.
		ffnNorm := "ffn_norm.weight"
		if spec.oai {
			ffnNorm = "post_attention_norm.weight"
		}
		if l.FFNNorm, err = vector(p+ffnNorm, hp.Dim, false); err != nil {
			return nil, err
		}
		// Biases are optional everywhere (llama.cpp loads them when
		// present) and required in qwen2; the norms only exist in the
		// architectures that use them (elsewhere they stay unused, and an
		// unused tensor is refused below).
		vecs := []struct {
			dst  *[]float32
			name string
			n    int
			load bool
			req  bool
		}{
			{&l.Bq, "attn_q.bias", qDim, true, spec.biases},
			{&l.Bk, "attn_k.bias", kvDim, true, spec.biases},
			{&l.Bv, "attn_v.bias", kvDim, true, spec.biases},
			{&l.QNorm, "attn_q_norm.weight", hp.HeadDim, spec.qkNorm, true},
			{&l.KNorm, "attn_k_norm.weight", hp.HeadDim, spec.qkNorm, true},
			{&l.PostAttnNorm, "post_attention_norm.weight", hp.Dim, spec.postNorms, true},
			{&l.PostFFNNorm, "post_ffw_norm.weight", hp.Dim, spec.postNorms, true},
			{&l.Bo, "attn_output.bias", hp.Dim, spec.oai, true},
			{&l.Sinks, "attn_sinks.weight", hp.Heads, spec.oai, true},
		}
		for _, v := range vecs {
			if !v.load {
				continue
			}
			if *v.dst, err = vector(p+v.name, v.n, !v.req); err != nil {
				return nil, err
			}
		}
		if (l.Bq == nil) != (l.Bk == nil) || (l.Bq == nil) != (l.Bv == nil) {
			return nil, fmt.Errorf("%w: layer %d has some of the q, k, v biases but not all three", ErrUnsupported, i)
		}
		l.Window, l.RopeBase = windows[i], bases[i]
	}
	if m.RopeFreqs, err = vector("rope_freqs.weight", hp.HeadDim/2, true); err != nil {
		return nil, err
	}
	if m.RopeFreqs == nil && hp.RopeScaling != nil {
		m.RopeFreqs = llama3FreqFactors(hp)
	}
	for _, t := range f.Tensors {
		if !used[t.Name] {
			return nil, fmt.Errorf("%w: unexpected tensor %s (%s %v)", ErrUnsupported, t.Name, t.Type, t.Dims)
		}
	}
	return m, nil
}

// LayerWindows returns each layer's sliding window (0: full attention) as
// FromGGUF sets Layer.Window, from the file's header alone (a KV pool can
// be planned before the weights load).
func LayerWindows(f *gguf.File, hp HParams) ([]int, error) {
	windows, _, err := layerAttention(f, hp)
	return windows, err
}

// layerAttention returns each layer's sliding window (0: full attention)
// and rotary base. In an architecture with sliding windows (gemma3,
// gpt-oss) and a positive attention.sliding_window, the layers that
// attention.sliding_window_pattern marks (an array of booleans, one per
// layer, or a period n: layer i slides unless i%n == n-1, and every layer
// slides for n = 0) or, without that key, the architecture's default
// period slide; they use rope.freq_base_swa (default 10000 for gemma3,
// rope.freq_base for gpt-oss).
func layerAttention(f *gguf.File, hp HParams) (windows []int, bases []float32, err error) {
	windows, bases = make([]int, hp.Layers), make([]float32, hp.Layers)
	for i := range bases {
		bases[i] = hp.RopeBase
	}
	spec := archs[hp.Arch]
	if spec.swaPattern == 0 {
		return windows, bases, nil
	}
	key := hp.Arch + ".attention.sliding_window"
	w, ok := f.Uint(key)
	if _, present := f.Get(key); present && !ok {
		return nil, nil, fmt.Errorf("llama: GGUF key %s is not an unsigned integer", key)
	}
	if !ok || w == 0 {
		return windows, bases, nil
	}
	if w > 1<<30 {
		return nil, nil, fmt.Errorf("llama: GGUF key %s = %d out of range", key, w)
	}
	sliding := make([]bool, hp.Layers)
	pkey := hp.Arch + ".attention.sliding_window_pattern"
	v, present := f.Get(pkey)
	switch pat := v.(type) {
	case []bool:
		if len(pat) != hp.Layers {
			return nil, nil, fmt.Errorf("llama: GGUF key %s has %d entries for %d layers", pkey, len(pat), hp.Layers)
		}
		copy(sliding, pat)
	default:
		n := uint64(spec.swaPattern)
		if present {
			if n, ok = f.Uint(pkey); !ok {
				return nil, nil, fmt.Errorf("llama: GGUF key %s is neither a period nor one boolean per layer", pkey)
			}
		}
		for i := range sliding {
			sliding[i] = n == 0 || uint64(i)%n < n-1
		}
	}
	base := hp.RopeBase
	if spec.swaBase10k {
		base = 10000
	}
	if b, ok := f.Float(hp.Arch + ".rope.freq_base_swa"); ok {
		base = float32(b)
	}
	if !(base > 0) || math.IsInf(float64(base), 0) {
		return nil, nil, fmt.Errorf("llama: GGUF key %s.rope.freq_base_swa = %g out of range", hp.Arch, base)
	}
	for i, s := range sliding {
		if s {
			windows[i], bases[i] = int(w), base
		}
	}
	return windows, bases, nil
}

// floatVector converts a 1-D F32/F16 tensor to []float32.
func floatVector(name string, typ gguf.Type, data []byte, n int) ([]float32, error) {
	out := make([]float32, n)
	switch typ {
	case gguf.TypeF32:
		if len(data) != 4*n {
			return nil, fmt.Errorf("llama: tensor %s has %d bytes, want %d", name, len(data), 4*n)
		}
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case gguf.TypeF16:
		if len(data) != 2*n {
			return nil, fmt.Errorf("llama: tensor %s has %d bytes, want %d", name, len(data), 2*n)
		}
		for i := range out {
			out[i] = quant.F16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		}
	default:
		return nil, fmt.Errorf("%w: 1-D tensor %s has type %s (want F32 or F16)", ErrUnsupported, name, typ)
	}
	return out, nil
}

// llama3FreqFactors computes the per-dimension-pair divisors of the rotary
// frequencies for llama3 scaling (what converters store as rope_freqs.weight).
func llama3FreqFactors(hp HParams) []float32 {
	sc := hp.RopeScaling
	out := make([]float32, hp.HeadDim/2)
	lowWave := float64(sc.OrigContextLen) / float64(sc.LowFreqFactor)
	highWave := float64(sc.OrigContextLen) / float64(sc.HighFreqFactor)
	for i := range out {
		freq := math.Pow(float64(hp.RopeBase), -float64(2*i)/float64(hp.HeadDim))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = sc.Factor
		default:
			smooth := (float64(sc.OrigContextLen)/wave - float64(sc.LowFreqFactor)) /
				float64(sc.HighFreqFactor-sc.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/float64(sc.Factor) + smooth))
		}
	}
	return out
}

package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// embedFixture serves stories260K's embeddings on the CPU runtime through
// httptest, with an admission gate: while closed (held), requests wait in
// the queue, so a test can have a whole request's inputs admitted into
// one step.
type embedFixture struct {
	h      *Handler
	sched  *scheduler.Scheduler
	rows   *rowsModel
	client oai.Client
	url    string
	model  string
	dim    int
	closed atomic.Bool // the admission gate
	// submitted counts Submit calls; the gate opens once holdUntil were
	// submitted and the loop holds them (AdmitOK).
	mu        sync.Mutex
	submitted int
	holdUntil int
	holdN     int // inputs held: the gate waits for the loop to hold them all
	// subs gets a value at every Submit (buffered; dropped when full).
	subs chan struct{}
}

// AdmitOK implements scheduler.Capacity: the gate. It opens once the held
// inputs were all submitted AND the scheduler's loop has taken them in
// (Stats().Waiting, published by the loop while the gate keeps it idle):
// opening it at the last Submit let the loop admit the ones it had already
// absorbed, one short, when the last submission was still in its channel.
// While closed the loop asks again every CapacityRetry.
func (f *embedFixture) AdmitOK() (bool, string) {
	if !f.closed.Load() {
		return true, ""
	}
	f.mu.Lock()
	all := f.holdUntil > 0 && f.submitted >= f.holdUntil
	n := f.holdN
	f.mu.Unlock()
	if all && f.sched.Stats().Waiting >= n {
		f.closed.Store(false)
		return true, ""
	}
	return false, "held by the test"
}

// rowsModel is the engine, recording the most embedding rows one step
// held.
type rowsModel struct {
	*runtime.Engine
	most atomic.Int32
}

func (m *rowsModel) Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error) {
	n := int32(0)
	for _, s := range seqs {
		if s.Hidden != nil {
			n++
		}
	}
	if n > m.most.Load() {
		m.most.Store(n)
	}
	return m.Engine.Step(ctx, seqs, samplers)
}

// gateScheduler counts the submitted inputs for the fixture's gate.
type gateScheduler struct {
	*scheduler.Scheduler
	f *embedFixture
}

func (g gateScheduler) Submit(ctx context.Context, r scheduler.Request) (*scheduler.Stream, error) {
	st, err := g.Scheduler.Submit(ctx, r)
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	g.f.submitted++
	select {
	case g.f.subs <- struct{}{}:
	default:
	}
	return st, err
}

// hold closes the gate until n more inputs are submitted.
func (f *embedFixture) hold(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holdUntil, f.holdN = f.submitted+n, n
	f.closed.Store(true)
}

func newEmbedFixture(t *testing.T, pooling batch.Pooling) *embedFixture {
	t.Helper()
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f32", NumBlocks: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kv := b.KV()
	f := &embedFixture{model: m.Name, subs: make(chan struct{}, 64), rows: &rowsModel{Engine: runtime.NewEngine(b, m.HP.VocabSize)}}
	sched, err := scheduler.New(scheduler.Config{
		BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, MaxSeqs: 64, MaxBatchTokens: 4096, ContextLen: m.HP.ContextLen,
		VocabSize: m.HP.VocabSize, Pooling: pooling, Capacity: f,
	}, f.rows)
	if err != nil {
		t.Fatal(err)
	}
	f.sched, f.dim = sched, sched.Limits().EmbedDim
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { // ends at cleanup
		defer close(runDone)
		sched.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-runDone })
	door, err := frontdoor.New(frontdoor.Config{Tokenizer: m.Tok, Limits: sched.Limits(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	f.h, err = New(Config{Scheduler: gateScheduler{sched, f}, Door: door, Tokenizer: m.Tok, ModelNames: []string{m.Name}, AuthToken: testToken})
	if err != nil {
		t.Fatal(err)
	}
	f.h.SetServing(true)
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	f.client = oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(testToken), option.WithMaxRetries(0))
	return f
}

// embed asks for the embeddings of texts in format and returns them as
// float32 (what weft computes: both encodings carry float32 values).
func (f *embedFixture) embed(t *testing.T, texts []string, format oai.EmbeddingNewParamsEncodingFormat) ([][]float32, *oai.CreateEmbeddingResponse) {
	t.Helper()
	resp, err := f.client.Embeddings.New(t.Context(), oai.EmbeddingNewParams{
		Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}, EncodingFormat: format,
	})
	if err != nil {
		t.Fatal(err)
	}
	return vectorsOf(t, resp, len(texts), f.dim), resp
}

func vectorsOf(t *testing.T, resp *oai.CreateEmbeddingResponse, n, dim int) [][]float32 {
	t.Helper()
	if len(resp.Data) != n {
		t.Fatalf("%d embeddings for %d inputs", len(resp.Data), n)
	}
	out := make([][]float32, n)
	for i, d := range resp.Data {
		if d.Index != int64(i) || d.Object != "embedding" || len(d.Embedding) != dim {
			t.Fatalf("data[%d]: index %d, object %q, %d values; want index %d, embedding, %d", i, d.Index, d.Object, len(d.Embedding), i, dim)
		}
		out[i] = make([]float32, dim)
		for j, v := range d.Embedding {
			out[i][j] = float32(v)
		}
	}
	return out
}

func storyTexts(n int) []string {
	animals := []string{"cat", "dog", "bird", "fish", "fox", "bear", "frog"}
	places := []string{"park", "sea", "forest", "garden", "town"}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("Once upon a time a little %s went to the %s and saw %d friends.", animals[i%len(animals)], places[i%len(places)], i+2)
	}
	return out
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// TestEmbeddingsSDK drives /v1/embeddings with the official client: the
// four input shapes, float and base64 giving the same vectors, unit norms,
// the usage, and errors in OpenAI's shape. Batch-invariant kernels make
// the vectors of one text comparable bit for bit across requests that
// batch it with others or not.
func TestEmbeddingsSDK(t *testing.T) {
	defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(true))
	f := newEmbedFixture(t, batch.PoolMean)
	ctx := t.Context()
	if f.dim != 64 {
		t.Fatalf("stories260K's width is 64, EmbedDim %d", f.dim)
	}
	texts := []string{"Once upon a time", "there was a little cat.", "The end."}
	floats, resp := f.embed(t, texts, oai.EmbeddingNewParamsEncodingFormatFloat)
	b64, _ := f.embed(t, texts, oai.EmbeddingNewParamsEncodingFormatBase64)
	if diff := cmp.Diff(floats, b64); diff != "" {
		t.Errorf("float and base64 encodings differ (-float +base64):\n%s", diff)
	}
	for i, v := range floats {
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		if math.Abs(ss-1) > 1e-5 {
			t.Errorf("vector %d: squared norm %v, want 1", i, ss)
		}
	}
	if cosine(floats[0], floats[1]) > 0.9999 {
		t.Errorf("two different texts gave the same vector (cosine %v)", cosine(floats[0], floats[1]))
	}
	if string(resp.Object) != "list" || resp.Model != f.model || resp.Usage.PromptTokens == 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens {
		t.Errorf("response: object %q, model %q, usage %+v", resp.Object, resp.Model, resp.Usage)
	}

	// One string, and its token ids (as one array and in an array of
	// arrays): the same vector (text takes BOS, as the ids below do).
	one, err := f.client.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String(texts[0])},
		Dimensions: oai.Int(64)})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := f.h.door.Encode(ctx, texts[0], true, false)
	if err != nil {
		t.Fatal(err)
	}
	toks64 := make([]int64, len(toks))
	for i, id := range toks {
		toks64[i] = int64(id)
	}
	byIDs, err := f.client.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: toks64}})
	if err != nil {
		t.Fatal(err)
	}
	byIDss, err := f.client.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{toks64, toks64}}})
	if err != nil {
		t.Fatal(err)
	}
	want := vectorsOf(t, one, 1, f.dim)[0]
	if diff := cmp.Diff(floats[0], want); diff != "" {
		t.Errorf("a string alone and in an array differ (-array +alone):\n%s", diff)
	}
	for name, r := range map[string]*oai.CreateEmbeddingResponse{"token ids": byIDs, "arrays of token ids": byIDss} {
		for i, v := range vectorsOf(t, r, len(r.Data), f.dim) {
			if diff := cmp.Diff(want, v); diff != "" {
				t.Errorf("%s[%d] (-text +ids):\n%s", name, i, diff)
			}
		}
		if r.Usage.PromptTokens != int64(len(toks)*len(r.Data)) {
			t.Errorf("%s: prompt tokens %d, want %d", name, r.Usage.PromptTokens, len(toks)*len(r.Data))
		}
	}

	long := make([]int64, f.sched.Limits().MaxEmbedTokens+1)
	for _, tc := range []struct {
		name   string
		params oai.EmbeddingNewParams
		status int
		param  string
	}{
		{"dimensions", oai.EmbeddingNewParams{Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String("a")}, Dimensions: oai.Int(32)}, 400, "dimensions"},
		{"empty string", oai.EmbeddingNewParams{Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", ""}}}, 400, "input[1]"},
		{"over the context", oai.EmbeddingNewParams{Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1}, long}}}, 400, "input[1]"},
		{"id outside the vocabulary", oai.EmbeddingNewParams{Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{1, 100000}}}, 400, "input[0]"},
		{"unknown model", oai.EmbeddingNewParams{Model: "nope", Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String("a")}}, 404, "model"},
	} {
		_, err := f.client.Embeddings.New(ctx, tc.params)
		var ae *oai.Error
		if !errors.As(err, &ae) {
			t.Errorf("%s: %v, want an API error", tc.name, err)
			continue
		}
		if ae.StatusCode != tc.status || ae.Param != tc.param || ae.Type != "invalid_request_error" {
			t.Errorf("%s: status %d, param %q, type %q (%s); want %d, %q, invalid_request_error", tc.name, ae.StatusCode, ae.Param, ae.Type, ae.Message, tc.status, tc.param)
		}
	}
	code, body := post(t, f.url+"/v1/embeddings", `{"model":"`+f.model+`","input":"a","encoding_format":"int8"}`)
	if code != 400 || !strings.Contains(body, `"param":"encoding_format"`) {
		t.Errorf("encoding_format int8: %d %s", code, body)
	}
	code, body = post(t, f.url+"/v1/embeddings", `{"model":"`+f.model+`","input":[]}`)
	if code != 400 || !strings.Contains(body, `"param":"input"`) {
		t.Errorf("no input: %d %s", code, body)
	}
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// batchTolerance is how far a vector computed inside a batch may be from
// the same text's vector computed alone without --batch-invariant (the
// packed products sum in another order): at most this in any component
// (vectors of unit norm), and a cosine of at least 0.9999.
const batchTolerance = 1e-4

// TestEmbeddingsBatchInvariance: a text's vector is the same computed
// alone as inside one step with 32 other texts, at the first, a middle
// and the last place of the batch: bit for bit with batch-invariant
// kernels, within batchTolerance without.
func TestEmbeddingsBatchInvariance(t *testing.T) {
	for _, invariant := range []bool{true, false} {
		t.Run(fmt.Sprintf("invariant=%v", invariant), func(t *testing.T) {
			defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(invariant))
			for _, pooling := range []batch.Pooling{batch.PoolMean, batch.PoolLast} {
				f := newEmbedFixture(t, pooling)
				target := "The little cat found a red ball under the old tree."
				alone, _ := f.embed(t, []string{target}, oai.EmbeddingNewParamsEncodingFormatFloat)
				others := storyTexts(32)
				for _, at := range []int{0, 16, 32} {
					texts := append(append(append([]string{}, others[:at]...), target), others[at:]...)
					f.hold(len(texts)) // the 33 inputs are admitted together
					f.rows.most.Store(0)
					got, _ := f.embed(t, texts, oai.EmbeddingNewParamsEncodingFormatBase64)
					if n := f.rows.most.Load(); n != 33 {
						t.Fatalf("%v, place %d: at most %d texts ran in one step, want all 33", pooling, at, n)
					}
					v, a := got[at], alone[0]
					cos := cosine(v, a)
					maxDiff := 0.0
					for i := range v {
						maxDiff = max(maxDiff, math.Abs(float64(v[i]-a[i])))
					}
					t.Logf("%v, place %d: cosine %.9f, max abs diff %.3g", pooling, at, cos, maxDiff)
					if invariant {
						if diff := cmp.Diff(a, v); diff != "" {
							t.Errorf("%v, place %d of 33 (-alone +batched):\n%s", pooling, at, diff)
						}
						continue
					}
					if cos < 0.9999 || maxDiff > batchTolerance {
						t.Errorf("%v, place %d of 33: cosine %v, max abs diff %g; want >= 0.9999, <= %g", pooling, at, cos, maxDiff, batchTolerance)
					}
				}
			}
		})
	}
}

// TestEmbeddingsDisconnectAndDrain: a client that goes away while its
// inputs wait has them cancelled (they leave the queue without running);
// during a drain a new request gets 503, and the drain completes.
func TestEmbeddingsDisconnectAndDrain(t *testing.T) {
	f := newEmbedFixture(t, batch.PoolLast)
	f.hold(1 << 20) // nothing is admitted
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := f.client.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: storyTexts(3)}})
		errc <- err
	}()
	for range 3 {
		<-f.subs
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v, want context.Canceled", err)
	}
	f.h.BeginDrain()
	_, err := f.client.Embeddings.New(t.Context(), oai.EmbeddingNewParams{Model: f.model, Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String("a")}})
	var ae *oai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("during the drain: %v, want 503", err)
	}
	select {
	case <-f.sched.Drained():
	case <-time.After(30 * time.Second):
		t.Fatalf("the drain did not complete: %+v", f.sched.Stats())
	}
	if st := f.sched.Stats(); st.Running != 0 || st.Waiting != 0 || st.KVBlocksUsed != 0 || st.PromptTokens != 0 {
		t.Errorf("after the drain: %+v; want nothing run or left", st)
	}
}

package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
)

// TestServeEmbeddings: serve with --embed-pooling mean answers gRPC Embed
// and /v1/embeddings on one pipeline: the same vector for the same text
// through either door, and GetModelInfo reports the dimensions and the
// pooling the flag chose (stories260K has no pooling_type).
func TestServeEmbeddings(t *testing.T) {
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f32", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	hlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client, _, _ := startServeArgs(t, serveDeps{Model: m, Backend: b, HTTP: hlis}, "--embed-pooling", "mean")
	ctx := context.Background()
	const text = "Once upon a time, there was a little cat."
	g, err := client.Embed(ctx, &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{{Input: &inferencev1.EmbedInput_Text{Text: text}}}})
	if err != nil {
		t.Fatal(err)
	}
	hc := oai.NewClient(option.WithBaseURL("http://"+hlis.Addr().String()+"/v1/"), option.WithMaxRetries(0))
	h, err := hc.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: m.Name, Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String(text)},
		EncodingFormat: oai.EmbeddingNewParamsEncodingFormatBase64})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.GetEmbeddings()) != 1 || len(h.Data) != 1 {
		t.Fatalf("%d gRPC and %d HTTP embeddings for one input", len(g.GetEmbeddings()), len(h.Data))
	}
	httpVec := make([]float32, len(h.Data[0].Embedding))
	for i, v := range h.Data[0].Embedding {
		httpVec[i] = float32(v)
	}
	if diff := cmp.Diff(g.GetEmbeddings()[0].GetValues(), httpVec); diff != "" {
		t.Errorf("gRPC and HTTP vectors of one text (-grpc +http):\n%s", diff)
	}
	if g.GetPromptTokens() != int32(h.Usage.PromptTokens) || g.GetPooling() != inferencev1.Pooling_POOLING_MEAN {
		t.Errorf("gRPC prompt tokens %d, pooling %v; HTTP prompt tokens %d", g.GetPromptTokens(), g.GetPooling(), h.Usage.PromptTokens)
	}
	info, err := client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetEmbeddingDimensions() != int32(m.HP.Dim) || info.GetPooling() != inferencev1.Pooling_POOLING_MEAN {
		t.Errorf("GetModelInfo: embedding_dimensions %d, pooling %v; want %d, mean", info.GetEmbeddingDimensions(), info.GetPooling(), m.HP.Dim)
	}
}

// TestEmbedPooling: the model file's pooling_type wins when it names a
// pooling into one vector; otherwise --embed-pooling, which is checked.
func TestEmbedPooling(t *testing.T) {
	for _, tc := range []struct {
		file     batch.Pooling
		fileType int64
		flag     string
		want     batch.Pooling
		why      string
	}{
		{batch.PoolCLS, 2, "mean", batch.PoolCLS, "the model file's pooling_type"},
		{batch.PoolingUnset, -1, "mean", batch.PoolMean, "--embed-pooling"},
		{batch.PoolingUnset, 4, "last", batch.PoolLast, "--embed-pooling (the file's pooling_type 4 names no pooling into one vector)"},
	} {
		p, why := embedPooling(&runtime.Model{Pooling: tc.file, PoolingType: tc.fileType}, tc.flag)
		if p != tc.want || why != tc.why {
			t.Errorf("file %v (%d), flag %s: %v, %q; want %v, %q", tc.file, tc.fileType, tc.flag, p, why, tc.want, tc.why)
		}
	}
	if _, err := parseServeFlags([]string{"--embed-pooling", "max"}); err == nil || !strings.Contains(err.Error(), "--embed-pooling") {
		t.Errorf("--embed-pooling max: %v", err)
	}
	c, err := parseServeFlags(nil)
	if err != nil || c.EmbedPooling != "last" {
		t.Errorf("default --embed-pooling %q (%v), want last", c.EmbedPooling, err)
	}
}

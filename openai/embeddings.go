package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/weft-inference/weft/internal/frontdoor"
)

// embeddingRequest is POST /v1/embeddings's body. Unknown fields are
// ignored, like OpenAI does.
type embeddingRequest struct {
	Model string `json:"model"`
	// Input is a string, an array of strings, an array of token ids or
	// an array of arrays of token ids (embedInputsOf).
	Input json.RawMessage `json:"input"`
	// EncodingFormat is "float" (default) or "base64".
	EncodingFormat string `json:"encoding_format"`
	// Dimensions, when set, must be the model's hidden size: vectors are
	// never truncated.
	Dimensions *int `json:"dimensions"`
	// User is logged, never used to decide anything.
	User string `json:"user"`
}

// embeddingResponse is OpenAI's list of embeddings.
type embeddingResponse struct {
	Object string          `json:"object"` // "list"
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingUsage  `json:"usage"`
}

type embeddingData struct {
	Object string `json:"object"` // "embedding"
	Index  int    `json:"index"`
	// Embedding is the vector as a JSON array of numbers ([]float32), or
	// with encoding_format base64 the base64 of its little-endian float32
	// bytes (a string).
	Embedding any `json:"embedding"`
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// embedInputsOf decodes input: a string, an array of strings, an array of
// token ids or an array of arrays of token ids; each string or id array
// is one input. An empty array is no input (refused by the Door). Text
// must be valid UTF-8; every other check is the Door's.
func embedInputsOf(raw json.RawMessage) ([]frontdoor.EmbedInput, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badParam("input", "required")
	}
	var text string
	var strs []string
	var ids []int32
	var idss [][]int32
	var out []frontdoor.EmbedInput
	switch {
	case json.Unmarshal(raw, &text) == nil:
		out = []frontdoor.EmbedInput{{Text: text}}
	case string(bytes.TrimSpace(raw)) == "[]":
		return nil, nil
	case json.Unmarshal(raw, &ids) == nil:
		out = []frontdoor.EmbedInput{{Tokens: true, IDs: ids}}
	case json.Unmarshal(raw, &strs) == nil:
		for _, s := range strs {
			out = append(out, frontdoor.EmbedInput{Text: s})
		}
	case json.Unmarshal(raw, &idss) == nil:
		for _, p := range idss {
			out = append(out, frontdoor.EmbedInput{Tokens: true, IDs: p})
		}
	default:
		return nil, badParam("input", "want a string, an array of strings, an array of token ids or an array of arrays of token ids")
	}
	for i, in := range out {
		if !in.Tokens && !utf8.ValidString(in.Text) {
			return nil, badParam(fmt.Sprintf("input[%d]", i), "not valid UTF-8")
		}
	}
	return out, nil
}

// float32Base64 is OpenAI's base64 encoding of a vector: the standard
// base64 of its float32 values, little-endian, one after the other.
func float32Base64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func (h *Handler) embeddings(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req embeddingRequest
	if err := h.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	resp, err := h.embed(r.Context(), &req, start)
	if err != nil {
		writeError(w, err)
		return
	}
	h.logUser(r, req.User)
	writeJSON(w, resp)
}

// embed checks req's wire shape and runs it through the Door's Embed,
// which owns every bound (inputs, dimensions, bytes, tokens).
func (h *Handler) embed(ctx context.Context, req *embeddingRequest, start time.Time) (*embeddingResponse, error) {
	if err := h.checkModel(req.Model); err != nil {
		return nil, err
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		return nil, badParam("encoding_format", "%q: want float or base64", req.EncodingFormat)
	}
	dims := 0
	if req.Dimensions != nil {
		if *req.Dimensions < 1 {
			return nil, badParam("dimensions", "%d must be >= 1", *req.Dimensions)
		}
		dims = *req.Dimensions
	}
	inputs, err := embedInputsOf(req.Input)
	if err != nil {
		return nil, err
	}
	res, err := h.door.Embed(ctx, h.cfg.Scheduler, frontdoor.EmbedRequest{
		Door: frontdoor.DoorOpenAI, Start: start, ID: frontdoor.RequestID(ctx), Inputs: inputs, Dimensions: dims,
	})
	if err != nil {
		return nil, err
	}
	out := &embeddingResponse{Object: "list", Data: make([]embeddingData, len(res.Vectors)), Model: req.Model,
		Usage: embeddingUsage{PromptTokens: res.PromptTokens, TotalTokens: res.PromptTokens}}
	for i, v := range res.Vectors {
		d := embeddingData{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			d.Embedding = float32Base64(v)
		}
		out.Data[i] = d
	}
	return out, nil
}

package openai

import (
	"net/http"
)

// POST /tokenize and POST /detokenize, in vLLM's shapes (llama-server's
// take the same fields). The tokenizing is the Door's, as for gRPC's
// Tokenize and Detokenize.

// tokenizeRequest is the body of POST /tokenize: a prompt, or chat
// messages rendered through the template.
type tokenizeRequest struct {
	// Model, when given, must be a served id.
	Model  string  `json:"model"`
	Prompt *string `json:"prompt"`
	// Messages are rendered as /v1/chat/completions renders them; the
	// tokens are that prompt.
	Messages []chatMessage `json:"messages"`
	// AddSpecialTokens adds the model's special tokens (BOS) to a prompt:
	// default true. With messages the template and the Door place them
	// as a chat request gets them, so only false (the default) is taken.
	AddSpecialTokens *bool `json:"add_special_tokens"`
	// AddGenerationPrompt (messages; default true) ends the rendering
	// with the opening of the assistant's turn, as a chat request's.
	AddGenerationPrompt *bool `json:"add_generation_prompt"`
}

type tokenizeResponse struct {
	Tokens []int32 `json:"tokens"`
	Count  int     `json:"count"`
	// MaxModelLen is the context length (prompt plus generated tokens).
	MaxModelLen int `json:"max_model_len"`
}

type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int32 `json:"tokens"`
}

type detokenizeResponse struct {
	Prompt string `json:"prompt"`
}

func (h *Handler) tokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	if err := h.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	ids, err := h.tokenizeIDs(r, &req)
	if err != nil {
		writeError(w, err)
		return
	}
	if ids == nil {
		ids = []int32{}
	}
	writeJSON(w, tokenizeResponse{Tokens: ids, Count: len(ids), MaxModelLen: h.door.Limits().ContextLen})
}

func (h *Handler) tokenizeIDs(r *http.Request, req *tokenizeRequest) ([]int32, error) {
	if req.Model != "" {
		if err := h.checkModel(req.Model); err != nil {
			return nil, err
		}
	}
	switch {
	case req.Prompt != nil && req.Messages != nil:
		return nil, badParam("prompt", "give prompt or messages, not both")
	case req.Prompt != nil:
		if req.AddGenerationPrompt != nil {
			return nil, badParam("add_generation_prompt", "applies to messages only")
		}
		special := req.AddSpecialTokens == nil || *req.AddSpecialTokens
		return h.door.Tokenize(r.Context(), "prompt", *req.Prompt, special, false)
	case req.Messages != nil:
		if req.AddSpecialTokens != nil && *req.AddSpecialTokens {
			return nil, badParam("add_special_tokens", "with messages the tokens are the chat prompt as served (the template and the server place the special tokens); leave it false")
		}
		if !h.door.HasChat() {
			return nil, errNoChatTemplate
		}
		msgs, err := chatMessages(req.Messages)
		if err != nil {
			return nil, err
		}
		gen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
		return h.door.ChatTokens(r.Context(), msgs, gen)
	}
	return nil, badParam("prompt", "give prompt or messages")
}

func (h *Handler) detokenize(w http.ResponseWriter, r *http.Request) {
	var req detokenizeRequest
	if err := h.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Model != "" {
		if err := h.checkModel(req.Model); err != nil {
			writeError(w, err)
			return
		}
	}
	text, err := h.door.Detokenize("tokens", req.Tokens)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, detokenizeResponse{Prompt: text})
}

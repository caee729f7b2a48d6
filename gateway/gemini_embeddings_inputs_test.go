package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestGeminiEmbeddingsInputsBounded: OpenAI's embeddings API takes at
// most 2048 inputs in one request, and so does the gateway's on a Gemini
// deployment, which it splits into batches of 100. With no bound, one
// client request of 200,000 one-letter inputs (1 MB) was sent upstream
// as 2,000 calls one after another, per attempt, their answers joined in
// the gateway's memory (its RSS went from 91 to 430 MB on upstream-sim's
// 8-value vectors; Gemini's have 768): found by review.
func TestGeminiEmbeddingsInputsBounded(t *testing.T) {
	g := &batchGemini{}
	_, c := batchStack(t, g)
	_, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gemini-emb",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: embedInputs(2049)}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		t.Fatalf("2049 inputs: err %v, want 400 as OpenAI's API answers", err)
	}
	g.mu.Lock()
	calls := g.calls
	g.mu.Unlock()
	if calls != 0 {
		t.Fatalf("2049 inputs: %d upstream calls, want none", calls)
	}

	r, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gemini-emb",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: embedInputs(2048)}})
	if err != nil || len(r.Data) != 2048 {
		t.Fatalf("2048 inputs: err %v, want 2048 embeddings", err)
	}
	g.mu.Lock()
	calls = g.calls
	g.mu.Unlock()
	if calls != 21 {
		t.Errorf("2048 inputs: %d upstream calls, want 21 batches", calls)
	}
}

package gemini

import (
	"net/http/httptest"
	"testing"
)

// TestUpstreamPathsEscapeTheModelsColon: the upstream model (a
// deployment's, or a prefix-routed client's) is escaped whole in every
// Gemini path: url.PathEscape leaves ':', which ends the model's name in
// Gemini's paths, and the native and countTokens routes put
// "x:streamGenerateContent" in as a method of its own.
func TestUpstreamPathsEscapeTheModelsColon(t *testing.T) {
	const want = "/models/x%3AstreamGenerateContent"
	gen, err := readGenerate(httptest.NewRequest("POST", "/gemini/v1beta/models/m:generateContent", nil), []byte(`{"contents":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	count, err := readCountTokens(httptest.NewRequest("POST", "/gemini/v1beta/models/m:countTokens", nil), []byte(`{"contents":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(string) (string, []byte, error){"generateContent": gen.Upstream, "countTokens": count.Upstream} {
		path, _, err := call("x:streamGenerateContent")
		if err != nil || path != want+":"+name {
			t.Errorf("%s's upstream path for model x:streamGenerateContent = %q (%v), want %q", name, path, err, want+":"+name)
		}
	}
	if path, _, err := (Chat{}).Request([]byte(`{"messages":[{"role":"user","content":"hi"}]}`), "models/x:streamGenerateContent", false); err != nil || path != want+":generateContent" {
		t.Errorf("the chat translation's path = %q (%v)", path, err)
	}
	if path, _, err := (Embeddings{}).Request([]byte(`{"input":"hi"}`), "x:streamGenerateContent"); err != nil || path[:len(want)+1] != want+":" {
		t.Errorf("the embeddings translation's path = %q (%v)", path, err)
	}
}

// TestEmbeddingsUpstreamModelWithModelsPrefix: Gemini names its models
// "models/{id}", and the chat translation takes a deployment's upstream
// model in either form. The embeddings translation did not: upstream model
// "models/text-embedding-004" went to /models/models%2Ftext-embedding-004
// (a 404 from Gemini) and, batched, named "models/models/..." in each
// request, so a deployment that served chat served no embeddings.
func TestEmbeddingsUpstreamModelWithModelsPrefix(t *testing.T) {
	for _, model := range []string{"text-embedding-004", "models/text-embedding-004"} {
		path, _, err := (Embeddings{}).Request([]byte(`{"input":"hi"}`), model)
		if err != nil || path != "/models/text-embedding-004:embedContent" {
			t.Errorf("%s: path %q (%v), want /models/text-embedding-004:embedContent", model, path, err)
		}
		path, body, err := (Embeddings{}).Request([]byte(`{"input":["a","b"]}`), model)
		want := `{"requests":[{"model":"models/text-embedding-004","content":{"parts":[{"text":"a"}]}},{"model":"models/text-embedding-004","content":{"parts":[{"text":"b"}]}}]}`
		if err != nil || path != "/models/text-embedding-004:batchEmbedContents" || string(body) != want {
			t.Errorf("%s: batch path %q body %s (%v), want %s", model, path, body, err, want)
		}
	}
}

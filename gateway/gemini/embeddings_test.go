package gemini

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// dimensions reaches Gemini as outputDimensionality, for one input and for
// each request of a batch: left out, the client got vectors of the model's
// full size where it asked for fewer.
func TestEmbeddingsRequestKeepsDimensions(t *testing.T) {
	for _, input := range []string{`"a"`, `["a","b"]`} {
		_, body, err := Embeddings{}.Request([]byte(`{"input":`+input+`,"dimensions":8}`), "text-embedding-004")
		if err != nil {
			t.Fatal(err)
		}
		var req struct {
			OutputDimensionality int `json:"outputDimensionality"`
			Requests             []struct {
				OutputDimensionality int `json:"outputDimensionality"`
			} `json:"requests"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		dims := []int{req.OutputDimensionality}
		if strings.HasPrefix(input, "[") {
			dims = dims[:0]
			for _, r := range req.Requests {
				dims = append(dims, r.OutputDimensionality)
			}
		}
		if len(dims) == 0 || strings.Count(input, `"`)/2 != len(dims) {
			t.Fatalf("input %s: request %s", input, body)
		}
		for _, d := range dims {
			if d != 8 {
				t.Errorf("input %s: outputDimensionality %d, want 8: %s", input, d, body)
			}
		}
	}
}

// A batch's embeddings are the list's items in order, each its index, and
// an error member beside them does not refuse the answer.
func TestEmbeddingsBodyIndexesEachEmbedding(t *testing.T) {
	var r tap.Report
	got, err := Embeddings{}.Body([]byte(`{"embeddings":[{"values":[0.1]},{"values":[0.2,0.3]}],"error":{"code":500,"message":"partial"}}`), "gemini/emb", &r)
	if err != nil || r.Error != "" {
		t.Fatalf("%v, report error %q", err, r.Error)
	}
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1]},{"object":"embedding","index":1,"embedding":[0.2,0.3]}],
	  "model":"gemini/emb","usage":{"prompt_tokens":0,"total_tokens":0}}`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

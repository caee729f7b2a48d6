package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/fixture"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestOpenAIFixturesReachTheClientAsAskedFor replays every recorded
// OpenAI chat stream that ended normally through /v1/chat/completions,
// with and without stream_options.include_usage, and holds what the
// client read to DESIGN's rule 7: every chunk of the upstream's that is
// not its usage chunk reaches the client, in order, unchanged but for its
// usage member; a usage object reaches the client only when it asked for
// one, and then once, in the last chunk before [DONE], with "choices":[]
// and the figures recorded (expected.json). The conformance test
// (cmd/tollgate) asks for usage every time and checks the ledger alone: a
// gateway that sent the usage chunk to a client that had not asked, left a
// report on the finish chunk, or held Azure's first chunk ("choices":[],
// prompt_filter_results, no usage) back as if it were the usage chunk,
// passed it; so did one that made up the usage chunk in place of the
// upstream's, dropping the upstream's vendor fields.
func TestOpenAIFixturesReachTheClientAsAskedFor(t *testing.T) {
	dir := fixtureDir(t)
	expected, err := fixture.LoadExpected(dir)
	if err != nil {
		t.Fatal(err)
	}
	streams, err := fixture.Streams(dir, "openai")
	if err != nil || len(streams) == 0 {
		t.Fatalf("no OpenAI fixtures under %s: %v", dir, err)
	}
	up := replayFixtures(t, dir)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = append(c.Providers, gateway.ProviderConfig{Name: "ro", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "k-123456789"})
	})
	tested := 0
	for _, name := range streams {
		want := expected[name]
		if want.UpstreamError {
			continue // error frames are scrubbed and may end the stream otherwise: not this test's
		}
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		// The upstream's chunks that are not its usage chunk, their usage
		// member removed (the gateway moves a report to the usage chunk,
		// and "usage":null may go).
		var relayed []map[string]any
		var usageChunk map[string]any // the upstream's own usage chunk, its usage member removed
		for _, d := range dataLines(string(raw)) {
			if d == "[DONE]" {
				continue
			}
			c := decodeChunk(t, d)
			if isUsageChunk(c) {
				delete(c, "usage")
				usageChunk = c
				continue
			}
			delete(c, "usage")
			relayed = append(relayed, c)
		}
		for _, include := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/include_usage=%v", name, include), func(t *testing.T) {
				model := "ro/" + strings.ReplaceAll(name, "/", "~")
				opts := ""
				if include {
					opts = `"stream_options":{"include_usage":true},`
				}
				e, body := doRequest(t, st, "/v1/chat/completions", `{"model":"`+model+`","stream":true,`+opts+`"messages":[{"role":"user","content":"hi"}]}`)
				if e.Status != usage.StatusOK || e.UsageSource != want.Source {
					t.Fatalf("event %s %s %+v (%s), want ok and %s", e.Status, e.UsageSource, e.Usage, e.Error, want.Source)
				}
				data := dataLines(body)
				if len(data) == 0 || data[len(data)-1] != "[DONE]" {
					t.Fatalf("the stream does not end with [DONE]:\n%s", body)
				}
				data = data[:len(data)-1]
				var got []map[string]any
				for i, d := range data {
					c := decodeChunk(t, d)
					u, has := c["usage"]
					if has && u != nil {
						if !include {
							t.Fatalf("chunk %d carries usage, which the client did not ask for: %s", i, d)
						}
						if i != len(data)-1 || !isUsageChunk(c) {
							t.Fatalf("chunk %d of %d carries usage; want it only in the last, with \"choices\":[]: %s", i, len(data), d)
						}
						checkUsageChunk(t, u, e.Usage, want)
						// The upstream's usage chunk, when it bills as
						// reported, is relayed (its vendor fields too), not
						// one made up in its place.
						if delete(c, "usage"); usageChunk != nil && want.Source == usage.SourceUpstream && !reflect.DeepEqual(c, usageChunk) {
							t.Fatalf("the client's usage chunk is %v (usage aside), want the upstream's %v", c, usageChunk)
						}
						continue
					}
					delete(c, "usage")
					got = append(got, c)
				}
				if include && (len(data) == 0 || !isUsageChunk(decodeChunk(t, data[len(data)-1]))) {
					t.Fatalf("the client asked for usage and got no usage chunk before [DONE]:\n%s", body)
				}
				if !reflect.DeepEqual(got, relayed) {
					t.Fatalf("the client got %d chunks (usage members aside):\n%v\nwant the upstream's %d, in order:\n%v", len(got), got, len(relayed), relayed)
				}
			})
			tested++
		}
	}
	if tested == 0 {
		t.Fatal("no OpenAI fixture replayed")
	}
}

// dataLines returns the data fields of an SSE body, one per event, in order.
func dataLines(body string) []string {
	var out []string
	var cur []string
	flush := func() {
		if cur != nil {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	for _, l := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		switch {
		case l == "":
			flush()
		case strings.HasPrefix(l, "data:"):
			cur = append(cur, strings.TrimPrefix(strings.TrimPrefix(l, "data:"), " "))
		}
	}
	flush()
	return out
}

func decodeChunk(t *testing.T, d string) map[string]any {
	t.Helper()
	var c map[string]any
	dec := json.NewDecoder(bytes.NewReader([]byte(d)))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("chunk %s: %v", d, err)
	}
	return c
}

// isUsageChunk reports whether c is a usage chunk: a usage object and no
// choices ("choices":[] alone is not one: Azure's first chunk).
func isUsageChunk(c map[string]any) bool {
	u, ok := c["usage"].(map[string]any)
	if !ok || u == nil {
		return false
	}
	ch, _ := c["choices"].([]any)
	return len(ch) == 0
}

// checkUsageChunk holds the usage the client was sent to what the event
// billed and, for a provider's report, to expected.json.
func checkUsageChunk(t *testing.T, u any, billed usage.Tokens, want fixture.Expected) {
	t.Helper()
	b, _ := json.Marshal(u)
	var got struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("usage %s: %v", b, err)
	}
	if got.PromptTokens != billed.PromptTokens || got.CompletionTokens != billed.CompletionTokens ||
		got.PromptTokensDetails.CachedTokens != billed.CachedTokens || got.CompletionTokensDetails.ReasoningTokens != billed.ReasoningTokens {
		t.Fatalf("the client was told %s, the event billed %+v", b, billed)
	}
	if want.Source == usage.SourceUpstream && (got.PromptTokens != want.PromptTokens || got.CompletionTokens != want.CompletionTokens ||
		got.PromptTokensDetails.CachedTokens != want.CachedTokens || got.CompletionTokensDetails.ReasoningTokens != want.ReasoningTokens) {
		t.Fatalf("the client was told %s, want expected.json's %+v", b, want)
	}
}

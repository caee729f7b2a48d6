package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestAnswerWithBytesAfterItsJSONIsBilledFromItsUsage: a whole answer
// followed by bytes that begin no JSON value (a proxy's NUL padding, a
// stray word after the closing brace) was read by each route its own way.
// The chat route's lenient reader billed it from its usage and relayed
// it; the same answer to a chat stream request was billed that usage
// while the client got an error event in place of the answer; a native
// or Responses answer was relayed, its usage lost and estimated (an
// upstream_error); a translated chat answer (Anthropic, Gemini) and an
// embeddings answer were refused 502. Every client's JSON decoder
// refuses such a body too. The bytes after the answer's value are now
// dropped before it is read: every route serves the answer as valid JSON
// and bills the provider's usage.
func TestAnswerWithBytesAfterItsJSONIsBilledFromItsUsage(t *testing.T) {
	for _, tail := range []string{"\x00\x00\x00", "xyz\n", " \r\n<!-- cached -->"} {
		for _, c := range wholeAnswers {
			t.Run(c.name, func(t *testing.T) {
				st := bodyStack(t, c.body+tail)
				resp := st.post(t, c.path, c.req)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
				streamed := strings.Contains(c.req, `"stream":true`)
				if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) || !streamed && !json.Valid(b) {
					t.Fatalf("tail %q: client: %d %.400q; want the answer, as JSON", tail, resp.StatusCode, b)
				}
				if e.Status != usage.StatusOK || e.UsageSource != usage.SourceUpstream || e.Usage != c.want || e.Error != "" {
					t.Fatalf("tail %q: event: status %s, source %s, usage %+v, error %q; want ok, upstream, %+v",
						tail, e.Status, e.UsageSource, e.Usage, e.Error, c.want)
				}
			})
		}
	}
}

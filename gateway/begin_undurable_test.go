package gateway_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// beginFailsJournal is a journal whose disk fills with a request's begin
// record: the write of the begin fails, so Failing reports it from then on.
type beginFailsJournal struct {
	*memJournal
	err error
}

func (j beginFailsJournal) Begin(e *usage.Event, body []byte) {
	j.memJournal.Begin(e, body)
	j.setFailing(j.err)
}

// TestRequestNotSentUpstreamWhenItsBeginIsNotJournaled: the crash journal
// was writing when the request was admitted, and its disk filled with the
// request's own begin record (or the journal of a gateway restarted on a
// full disk had not written yet, so was not failing). The request went
// upstream all the same, with no record of it that survives the process:
// a crash review, a gateway kill -9'd on a full tmpfs, found a streamed
// request that the client got a 200 and output for, the upstream billed,
// and that neither the ledger, the journal nor the log held. It is
// refused, 503 metering_unavailable, before it goes upstream.
func TestRequestNotSentUpstreamWhenItsBeginIsNotJournaled(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, wholeChatAnswer)
	}))
	defer up.Close()
	cfg, _ := simConfig(t)
	cfg = withModelOm(cfg, up.URL)
	j := beginFailsJournal{&memJournal{}, errors.New("journal: write journal/00000000000000000004.journal: no space left on device")}
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: &memSink{}, Journal: j})
	for _, body := range []string{
		`{"model":"om","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"om","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		j.setFailing(nil) // writing at admission
		code, got := postChat(t, gw, body)
		if n := calls.Load(); n != 0 {
			t.Fatalf("%s: sent upstream %d times, though its begin was not journaled (answered %d %s)", body, n, code, got)
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(got, "metering_unavailable") {
			t.Errorf("%s: %d %s; want 503 metering_unavailable", body, code, got)
		}
	}
}

// wholeChatAnswer is an OpenAI chat completion, whole, with its usage
// (prompt 9, completion 5), as the upstreams of these tests answer.
const wholeChatAnswer = `{"id":"c","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`

// withModelOm adds to cfg an OpenAI provider at url (its /v1) and the
// model "om" on it, "gpt-x" upstream.
func withModelOm(cfg gateway.Config, url string) gateway.Config {
	cfg.Providers = append(cfg.Providers, gateway.ProviderConfig{Name: "op", Type: "openai", BaseURL: url + "/v1", APIKey: "k"})
	cfg.Models = append(cfg.Models, gateway.ModelConfig{Name: "om", Provider: "op", UpstreamModel: "gpt-x"})
	return cfg
}

// postChat sends body to gw's chat completions with the test key, and
// returns the answer's status and body.
func postChat(t *testing.T, gw *gateway.Server, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+gw.Addr()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return answer(t, resp)
}

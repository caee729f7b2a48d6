package gateway_test

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// heldKeys is a key lookup whose one key's state the test changes.
type heldKeys struct {
	mu    sync.Mutex
	state usage.KeyState
	gone  bool
}

func (k *heldKeys) LookupKey(secret string) (usage.KeyState, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state, secret == "tg-held" && !k.gone
}

// TestKeyCheckedAgainOnceTheBodyArrives: the key was checked when a
// request's headers arrived; a client that held its body back (up to
// read_timeout, 60 s) was served on the key's old state after a
// revocation, an expiry, a spend block or an allowed_models change (an
// attacker review: 30 requests held so spent a prepaid balance 20 times
// over after the gateway answered 402). The key is read again when the
// body has arrived.
func TestKeyCheckedAgainOnceTheBodyArrives(t *testing.T) {
	k := &heldKeys{}
	reset := func() {
		k.mu.Lock()
		k.state, k.gone = usage.KeyState{CustomerID: testCustomer, KeyID: testKeyID}, false
		k.mu.Unlock()
	}
	cfg, up := simConfig(t)
	st := &stack{sim: up, sink: &memSink{}, journal: &memJournal{}}
	st.gw = startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: k, Sink: st.sink, Journal: st.journal})
	st.url = "http://" + st.gw.Addr()
	body := `{"model":"sim-pro","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	later := time.Now().Add(-time.Minute)
	for _, c := range []struct {
		name   string
		change func(*heldKeys)
		want   int
	}{
		{"unchanged", func(*heldKeys) {}, http.StatusOK},
		{"revoked", func(k *heldKeys) { k.gone = true }, http.StatusUnauthorized},
		{"expired", func(k *heldKeys) { k.state.ExpiresAt = &later }, http.StatusUnauthorized},
		{"spend blocked", func(k *heldKeys) { k.state.Blocked = "the daily limit is spent" }, http.StatusPaymentRequired},
		{"model no longer allowed", func(k *heldKeys) { k.state.AllowedModels = []string{"sim-small"} }, http.StatusForbidden},
	} {
		reset()
		pr, pw := io.Pipe()
		req, _ := http.NewRequest(http.MethodPost, st.url+"/v1/chat/completions", pr)
		req.ContentLength = int64(len(body))
		req.Header.Set("Authorization", "Bearer tg-held")
		req.Header.Set("Content-Length", strconv.Itoa(len(body)))
		done := make(chan *http.Response, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				close(done)
				return
			}
			done <- resp
		}()
		_, _ = io.WriteString(pw, body[:5]) // the headers and a little of the body: the key is checked
		time.Sleep(300 * time.Millisecond)
		k.mu.Lock()
		c.change(k)
		k.mu.Unlock()
		_, _ = io.WriteString(pw, body[5:])
		pw.Close()
		resp := <-done
		if resp == nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s while the body was held back: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

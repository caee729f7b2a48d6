package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
)

// TestHeldHeadIsNotHeldForEver: the events before a stream's first output
// are held so that Anthropic's overload (an overloaded_error right after
// message_start) fails over. They were held until output came, however
// long: a prompt the model takes a minute to start answering sent the
// client nothing, not even the response's headers, while Anthropic's pings
// (its keep-alive) piled up in the hold, so that a proxy's or a client's
// timeout for a silent or header-less response (nginx's 60 s
// proxy_read_timeout, Cloudflare's 100 s) cut a request that was
// proceeding, where before the change the client had message_start and
// every ping at once. The hold now ends at the first event past
// gateway.MaxHeadWait: the headers and the held events go out then.
func TestHeldHeadIsNotHeldForEver(t *testing.T) {
	st := oneProviderStack(t, "anthropic", slowToBegin(t))
	began := time.Now()
	resp := st.post(t, "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", testKey)
	headers := time.Since(began)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b), slowStart+slowPing) || !strings.Contains(string(b), "message_stop") {
		t.Fatalf("status %d, body %.300q", resp.StatusCode, b)
	}
	if headers > gateway.MaxHeadWait+headersSlack {
		t.Fatalf("the client had the response's headers after %v, with the upstream pinging all along; want them by %v", headers.Round(time.Millisecond), gateway.MaxHeadWait+headersSlack)
	}
}

// TestChatRoleChunkIsNotHeldForEver: on the chat route translated from
// Anthropic the role chunk is no longer sent at message_start but with
// the first output, so that an overload right after message_start fails
// over. A model slow to begin then left the client without the response's
// headers until its first output, however long (the pings are not
// translated): the chat client's timeouts and its proxies' (Cloudflare's
// 100 s for the headers) cut a request that was proceeding. The role
// chunk now goes out with the first event past gateway.MaxHeadWait.
func TestChatRoleChunkIsNotHeldForEver(t *testing.T) {
	st := oneProviderStack(t, "anthropic", slowToBegin(t))
	began := time.Now()
	resp := st.post(t, "/v1/chat/completions", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	headers := time.Since(began)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"role":"assistant"`) || strings.Count(string(b), `"role":"assistant"`) != 1 || !strings.Contains(string(b), "Hi there") || !strings.Contains(string(b), "[DONE]") {
		t.Fatalf("status %d, body %.300q", resp.StatusCode, b)
	}
	if headers > gateway.MaxHeadWait+headersSlack {
		t.Fatalf("the client had the response's headers after %v, with the upstream pinging all along; want them by %v", headers.Round(time.Millisecond), gateway.MaxHeadWait+headersSlack)
	}
}

// slowStart, slowPing and slowText are an Anthropic stream whose model is
// slow to begin: message_start, then a ping every 100 ms for
// slowThinking, then its output.
const (
	slowStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n"
	slowPing  = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
	slowText  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi there\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	// headersSlack is how long past MaxHeadWait the headers may take (the
	// next ping, a loaded machine); slowThinking is past both, so that a
	// hold until the output cannot pass.
	headersSlack = 2 * time.Second
	slowThinking = gateway.MaxHeadWait + headersSlack + 2*time.Second
)

// slowToBegin starts an Anthropic upstream that sends the stream above,
// and returns its URL.
func slowToBegin(t *testing.T) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, slowStart)
		w.(http.Flusher).Flush()
		for end := time.Now().Add(slowThinking); time.Now().Before(end); {
			time.Sleep(100 * time.Millisecond)
			_, _ = io.WriteString(w, slowPing)
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, slowText)
	}))
	t.Cleanup(up.Close)
	return up.URL
}

package gateway_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestNativeAnthropicUnknownEventAfterMessageDeltaIsRelayed: Anthropic
// may add event types to its streams ("Streaming Messages", other
// events: "handle unknown event types gracefully"), and its SDKs skip
// them, as the gateway's tap does. One after message_delta broke the
// stream off: the client's SDK failed with "unexpected EOF" and never got
// message_stop, while the ledger recorded the request ok (a client that
// retries pays twice). Such an event, carrying none of the members output
// comes in, is relayed like a ping; one that does carry them is still not
// relayed (TestNativeAnthropicUnknownEventWithOutputAfterMessageDelta).
func TestNativeAnthropicUnknownEventAfterMessageDeltaIsRelayed(t *testing.T) {
	body := anthStart(1) +
		anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`) +
		anthEv("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		anthDelta5 +
		anthEv("message_metadata", `{"type":"message_metadata","region":"us","latency_ms":412}`) +
		anthEv("message_stop", `{"type":"message_stop"}`)
	st := oneProviderStack(t, "anthropic", jsonUpstream(t, "text/event-stream", body).URL)
	resp := st.post(t, "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", testKey)
	b, err := readAllErr(resp)
	if err != nil || string(b) != body {
		t.Fatalf("read error %v; body, not the upstream's:\n%s", err, b)
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusOK || e.Usage.CompletionTokens != 5 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %s, billed %+v (%s); want ok, 5 (upstream)", e.Status, e.Usage, e.UsageSource)
	}
}

// TestNativeAnthropicUnknownEventWithOutputAfterMessageDelta: an event of
// an unknown type that carries a delta, a content block or a message (in
// any spelling of the key), which a client may read output from, is not
// relayed after the final report.
func TestNativeAnthropicUnknownEventWithOutputAfterMessageDelta(t *testing.T) {
	for name, data := range map[string]string{
		"delta":         `{"type":"text_more","index":0,"delta":{"type":"text_delta","text":"` + revWords + `"}}`,
		"Delta":         `{"type":"text_more","index":0,"Delta":{"type":"text_delta","text":"` + revWords + `"}}`,
		"content_block": `{"type":"block_more","index":1,"content_block":{"type":"tool_use","id":"t","name":"","input":{"x":"` + revWords + `"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			typ := "text_more"
			if name == "content_block" {
				typ = "block_more"
			}
			body := anthStart(1) + anthDelta5
			for range 20 {
				body += anthEv(typ, data)
			}
			body += anthEv("message_stop", `{"type":"message_stop"}`)
			billed, src, words := nativeAnthropic(t, body)
			if int64(words) > billed {
				t.Fatalf("client read %d words after message_delta; billed completion %d (%s)", words, billed, src)
			}
		})
	}
}

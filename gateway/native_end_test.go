package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// How a native stream ends when its client leaves after the upstream's
// usage report and the upstream holds its body open.

// heldUpstream serves body, flushed, then holds the response open until
// the gateway lets it go (reported on the channel returned) or 60 s pass.
func heldUpstream(t *testing.T, body string) (*httptest.Server, <-chan time.Time) {
	t.Helper()
	let := make(chan time.Time, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, body)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			let <- time.Now()
		case <-time.After(60 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	return up, let
}

// nativeStack is oneProviderStack with drain_timeout drain and a
// stall_timeout of a minute, so that only the drain's end or the gateway's
// own choice can let a held upstream go.
func nativeStack(t *testing.T, typ, url string, drain time.Duration) *stack {
	t.Helper()
	base := url + "/v1"
	if typ == "gemini" {
		base = url + "/v1beta"
	}
	return newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{{Name: "up", Type: typ, BaseURL: base, APIKey: "sk-up-123456789", StallTimeout: time.Minute}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}}
		c.DrainTimeout = drain
	})
}

// TestNativeClientGoneAfterMessageDeltaLetsTheUpstreamGo (left alone at
// stop 49): on /anthropic/v1/messages, a client that left after the
// upstream's message_delta (its final usage report), while the upstream
// held its body open with no message_stop, held a drain slot and the
// upstream for all of drain_timeout, and the event then said the usage
// did not arrive, though it was billed from that report. As on the chat
// route, the usage is known at message_delta: the upstream is let go as
// the client leaves, and the event says why the rest was not read.
func TestNativeClientGoneAfterMessageDeltaLetsTheUpstreamGo(t *testing.T) {
	body := anthStart(1) +
		anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello there"}}`) +
		anthEv("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		anthDelta5
	up, let := heldUpstream(t, body)
	st := nativeStack(t, "anthropic", up.URL, 30*time.Second)
	resp := st.post(t, "/anthropic/v1/messages", anthRequest, "x-api-key", testKey)
	until(t, lines(resp.Body), "content_block_stop")
	time.Sleep(200 * time.Millisecond) // the gateway has read the message_delta sent with it
	resp.Body.Close()
	left := time.Now()
	select {
	case at := <-let:
		if d := at.Sub(left); d > 10*time.Second {
			t.Fatalf("the upstream was let go %s after the client left; want at once (drain_timeout is 30 s)", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream was still held 20 s after the client left, its message_delta read (drain_timeout 30 s)")
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Usage.PromptTokens != 10 || e.Usage.CompletionTokens != 5 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %s %s %+v (%s), want the provider's 10 + 5", e.Status, e.UsageSource, e.Usage, e.Error)
	}
	if e.Status != usage.StatusClientCancelled || !strings.Contains(e.Error, "last usage report") {
		t.Fatalf("event %s (%q), want client_cancelled, saying the usage report was read", e.Status, e.Error)
	}
}

// TestDrainTimeoutAfterAUsageReportSaysSo: a Gemini stream's reports are
// cumulative, so a client that leaves after one has the upstream read on
// to its end or drain_timeout. When drain_timeout ends it, the usage did
// arrive and is billed: the event's error said it did not.
func TestDrainTimeoutAfterAUsageReportSaysSo(t *testing.T) {
	body := `data: {"candidates":[{"content":{"parts":[{"text":"hello "}],"role":"model"},"index":0}]}` + "\r\n\r\n" +
		`data: {"candidates":[{"content":{"parts":[{"text":"there"}],"role":"model"},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15}}` + "\r\n\r\n"
	up, let := heldUpstream(t, body)
	st := nativeStack(t, "gemini", up.URL, time.Second)
	resp := st.post(t, "/gemini/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", testKey)
	until(t, lines(resp.Body), "hello")
	time.Sleep(200 * time.Millisecond) // the gateway has read the report sent with it
	resp.Body.Close()
	select {
	case <-let:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream was still held 20 s after the client left (drain_timeout 1 s)")
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Usage.PromptTokens != 10 || e.Usage.CompletionTokens != 5 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %s %s %+v (%s), want the provider's 10 + 5", e.Status, e.UsageSource, e.Usage, e.Error)
	}
	if e.Status != usage.StatusClientCancelled || !strings.Contains(e.Error, "had reported usage") || strings.Contains(e.Error, "did not arrive") {
		t.Fatalf("event %s (%q), want client_cancelled, saying the usage arrived and the end did not", e.Status, e.Error)
	}
}

// stagedUpstream serves parts, each flushed, wait apart, then ends (or
// stops once the gateway lets it go).
func stagedUpstream(t *testing.T, wait time.Duration, parts ...string) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, part := range parts {
			if i > 0 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(wait):
				}
			}
			fmt.Fprint(w, part)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// anthRequest is a streamed Messages request for the model m.
const anthRequest = `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

// leaveAt posts anthRequest to path on an Anthropic upstream, up, whose
// drain_timeout is 30 s; reads up to the line holding mark; waits for the
// gateway to read what came with it; leaves; and returns the event.
func leaveAt(t *testing.T, up *httptest.Server, path, mark string) usage.Event {
	t.Helper()
	st := nativeStack(t, "anthropic", up.URL, 30*time.Second)
	resp := st.post(t, path, anthRequest, "x-api-key", testKey)
	until(t, lines(resp.Body), mark)
	time.Sleep(200 * time.Millisecond)
	resp.Body.Close()
	return st.sink.event(t, resp.Header.Get("X-Request-Id"))
}

// anthRelay serves body from an Anthropic upstream through
// /anthropic/v1/messages to a client that reads it all: what the client
// read, the read's error (a stream broken off), and the event recorded.
func anthRelay(t *testing.T, body string) (string, usage.Event, error) {
	t.Helper()
	st := oneProviderStack(t, "anthropic", jsonUpstream(t, "text/event-stream", body).URL)
	resp := st.post(t, "/anthropic/v1/messages", anthRequest, "x-api-key", testKey)
	b, err := readAllErr(resp)
	return string(b), st.sink.event(t, resp.Header.Get("X-Request-Id")), err
}

func anthDeltaN(n int) string {
	return anthEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":`+itoa(n)+`}}`)
}

// anthText is an Anthropic stream's start and one text block.
var anthText = anthStart(1) +
	anthEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
	anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello there"}}`) +
	anthEv("content_block_stop", `{"type":"content_block_stop","index":0}`)

// TestClientGoneBetweenTwoMessageDeltasIsBilledTheLast (a review):
// Anthropic documents "one or more message_delta events", each with the
// usage so far. A client that left after the first, on either route, was
// billed the first (5 of 50 output tokens): the upstream was let go at
// once, or the relay stopped at the first report it read with the client
// gone. The upstream now has a second after a final report to repeat it
// or end.
func TestClientGoneBetweenTwoMessageDeltasIsBilledTheLast(t *testing.T) {
	for _, c := range []struct {
		name, path, body, mark string
		first, rest            string
	}{
		{"native, gone after the first", "/anthropic/v1/messages", anthRequest,
			"content_block_stop", anthText + anthDeltaN(5), anthDeltaN(50) + anthEv("message_stop", `{"type":"message_stop"}`)},
		{"native, gone before either", "/anthropic/v1/messages", anthRequest,
			"content_block_stop", anthText, anthDeltaN(5) + anthDeltaN(50) + anthEv("message_stop", `{"type":"message_stop"}`)},
		{"chat, gone after the first", "/v1/chat/completions", anthRequest,
			"hello there", anthText + anthDeltaN(5), anthDeltaN(50) + anthEv("message_stop", `{"type":"message_stop"}`)},
		{"chat, gone before either", "/v1/chat/completions", anthRequest,
			"hello there", anthText, anthDeltaN(5) + anthDeltaN(50) + anthEv("message_stop", `{"type":"message_stop"}`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := leaveAt(t, stagedUpstream(t, time.Second, c.first, c.rest), c.path, c.mark)
			if e.Usage.CompletionTokens != 50 || e.UsageSource != usage.SourceUpstream {
				t.Fatalf("event %s %s %+v (%s), want the last message_delta's 50", e.Status, e.UsageSource, e.Usage, e.Error)
			}
		})
	}
}

// TestEveryMessageDeltaTheClientReadsIsBilled (a review): with three
// message_delta events, the native route made the event durable at the
// second and relayed the third after it: the client read 50 output
// tokens, and 20 were billed. A repeated report now takes the held one's
// place, and the event is made durable at message_stop.
func TestEveryMessageDeltaTheClientReadsIsBilled(t *testing.T) {
	body := anthText + anthDeltaN(5) + anthDeltaN(20) + anthDeltaN(50) + anthEv("message_stop", `{"type":"message_stop"}`)
	got, e, err := anthRelay(t, body)
	if err != nil || got != body {
		t.Fatalf("read error %v; body, not the upstream's:\n%s", err, got)
	}
	if e.Status != usage.StatusOK || e.Usage.CompletionTokens != 50 || e.UsageSource != usage.SourceUpstream {
		t.Fatalf("event %s %s %+v (%s), want ok and the last message_delta's 50, which the client read", e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

// TestARepeatedErrorFrameIsScrubbed (a review): a native stream's error
// frame was scrubbed of the upstream's key only when it changed the
// request's error, so the same frame twice sent the key in the second.
func TestARepeatedErrorFrameIsScrubbed(t *testing.T) {
	anth := anthEv("error", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-up-123456789"}}`)
	resp := anthEv("error", `{"type":"error","code":"invalid_api_key","message":"Incorrect API key provided: sk-up-123456789"}`)
	for _, c := range []struct{ name, typ, path, request, body string }{
		{"anthropic", "anthropic", "/anthropic/v1/messages", anthRequest,
			anthText + anth + anth},
		{"responses", "openai", "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`,
			anthEv("response.created", `{"type":"response.created","response":{"status":"in_progress","model":"m"}}`) + resp + resp},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := oneProviderStack(t, c.typ, jsonUpstream(t, "text/event-stream", c.body).URL)
			r := st.post(t, c.path, c.request, "x-api-key", testKey)
			b, _ := readAllErr(r)
			if strings.Contains(string(b), "sk-up-123456789") || strings.Count(string(b), "redacted") < 2 {
				t.Fatalf("the client got\n%s\nwant both error frames, the upstream's key redacted", b)
			}
		})
	}
}

// TestDrainTimeoutBeforeTheFinalReportSaysSo (a review): message_start's
// opening count is a report, but not the usage; a drain that times out
// after it alone says the usage did not arrive.
func TestDrainTimeoutBeforeTheFinalReportSaysSo(t *testing.T) {
	up, let := heldUpstream(t, anthText)
	st := nativeStack(t, "anthropic", up.URL, time.Second)
	resp := st.post(t, "/anthropic/v1/messages", anthRequest, "x-api-key", testKey)
	until(t, lines(resp.Body), "hello there")
	resp.Body.Close()
	select {
	case <-let:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream was still held 20 s after the client left (drain_timeout 1 s)")
	}
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	if e.Status != usage.StatusClientCancelled || !strings.Contains(e.Error, "did not arrive") {
		t.Fatalf("event %s %s %+v (%q), want client_cancelled, saying the usage did not arrive", e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

// TestAnEventBetweenTwoMessageDeltasDoesNotEndTheCount (a review): a
// ping, a comment or the close of a block between two message_delta
// events made the event durable at the first, and the second was relayed
// after it: the client read 50 output tokens, 5 were billed. Quiet events
// after a report are now held with it, since it may come again.
func TestAnEventBetweenTwoMessageDeltasDoesNotEndTheCount(t *testing.T) {
	stop := anthEv("message_stop", `{"type":"message_stop"}`)
	for _, c := range []struct{ name, between string }{
		{"ping", anthEv("ping", `{"type":"ping"}`)},
		{"comment", ": keep-alive\n\n"},
		{"content_block_stop", anthEv("content_block_stop", `{"type":"content_block_stop","index":0}`)},
		{"none", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := anthText + anthDeltaN(5) + c.between + anthDeltaN(50) + stop
			got, e, err := anthRelay(t, body)
			if err != nil || got != body {
				t.Fatalf("read error %v; body, not the upstream's:\n%s", err, got)
			}
			if e.Status != usage.StatusOK || e.Usage.CompletionTokens != 50 {
				t.Fatalf("event %s %s %+v (%s), want ok and the 50 the client read", e.Status, e.UsageSource, e.Usage, e.Error)
			}
		})
	}
	t.Run("client gone after the ping", func(t *testing.T) {
		up := stagedUpstream(t, 500*time.Millisecond, anthText+anthDeltaN(5)+anthEv("ping", `{"type":"ping"}`), anthDeltaN(50)+stop)
		e := leaveAt(t, up, "/anthropic/v1/messages", "content_block_stop")
		if e.Usage.CompletionTokens != 50 {
			t.Fatalf("event %s %s %+v (%q), want the last message_delta's 50", e.Status, e.UsageSource, e.Usage, e.Error)
		}
	})
}

// TestAReportAfterAnErrorIsNotRelayedUnbilled (a review): an error after
// the final report makes the event durable with the request's status; a
// report after that is not relayed, so the client never reads a count
// the event does not bill.
func TestAReportAfterAnErrorIsNotRelayedUnbilled(t *testing.T) {
	body := anthText + anthDeltaN(5) +
		anthEv("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`) +
		anthDeltaN(50) + anthEv("message_stop", `{"type":"message_stop"}`)
	got, e, _ := anthRelay(t, body)
	if strings.Contains(got, `"output_tokens":50`) && e.Usage.CompletionTokens != 50 ||
		!strings.Contains(got, `"output_tokens":5}`) || e.Usage.CompletionTokens < 5 {
		t.Fatalf("the client got\n%s\nevent %s %s %+v (%s)", got, e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

func anthWords(n int) string {
	return anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+
		strings.Repeat("lorem ipsum dolor sit amet ", n)+`"}}`)
}

// TestLateOutputAfterTheFinalReportIsBilledAlikeClientGoneOrNot (a
// review): output after a final report breaks the stream off, and only
// the event that carried it is counted. With the client gone the rule was
// skipped and a second of late output, which nobody read and the report
// did not count, was billed.
func TestLateOutputAfterTheFinalReportIsBilledAlikeClientGoneOrNot(t *testing.T) {
	late := anthDelta5 + anthWords(200) + anthWords(200) + anthWords(200) + anthWords(200) + anthEv("message_stop", `{"type":"message_stop"}`)
	_, connected, _ := anthRelay(t, anthText+late)

	gone := leaveAt(t, stagedUpstream(t, 500*time.Millisecond, anthText, late), "/anthropic/v1/messages", "hello there")
	if gone.Usage.CompletionTokens > connected.Usage.CompletionTokens || connected.Usage.CompletionTokens < 200 {
		t.Fatalf("a client that left, and read none of the late output, billed %d completion tokens; a connected one %d",
			gone.Usage.CompletionTokens, connected.Usage.CompletionTokens)
	}
}

// TestEachRepeatedReportRenewsTheWait (a review): the second after a
// client gone with the usage known counts from the last report, not from
// the client's leaving: reports 0.7 s apart are all read.
func TestEachRepeatedReportRenewsTheWait(t *testing.T) {
	up := stagedUpstream(t, 700*time.Millisecond, anthText+anthDeltaN(5), anthDeltaN(20), anthDeltaN(50)+anthEv("message_stop", `{"type":"message_stop"}`))
	e := leaveAt(t, up, "/anthropic/v1/messages", "content_block_stop")
	if e.Usage.CompletionTokens != 50 {
		t.Fatalf("event %s %s %+v (%q), want the last message_delta's 50 (each came within a second of the one before)", e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

// TestNoDrainSlotAfterTheUsageSaysSo (a review): with no drain slot free,
// an upstream whose usage is known is let go at once, and the event says
// so rather than claiming a second's wait.
func TestNoDrainSlotAfterTheUsageSaysSo(t *testing.T) {
	up1, _ := heldUpstream(t, anthText)
	up2, let2 := heldUpstream(t, anthText+anthDelta5)
	st := newStack(t, func(c *gateway.Config) {
		c.Providers = []gateway.ProviderConfig{
			{Name: "up", Type: "anthropic", BaseURL: up1.URL + "/v1", APIKey: "sk-up-123456789", StallTimeout: time.Minute},
			{Name: "up2", Type: "anthropic", BaseURL: up2.URL + "/v1", APIKey: "sk-up-123456789", StallTimeout: time.Minute}}
		c.Models = []gateway.ModelConfig{{Name: "m", Provider: "up"}, {Name: "m2", Provider: "up2"}}
		c.DrainTimeout = 30 * time.Second
		c.MaxDrains = 1
	})
	r1 := st.post(t, "/anthropic/v1/messages", anthRequest, "x-api-key", testKey)
	until(t, lines(r1.Body), "hello there")
	r1.Body.Close() // drains, holding the one slot
	time.Sleep(200 * time.Millisecond)
	r2 := st.post(t, "/anthropic/v1/messages", `{"model":"m2","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", testKey)
	until(t, lines(r2.Body), "content_block_stop")
	time.Sleep(200 * time.Millisecond)
	r2.Body.Close()
	select {
	case <-let2:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream was still held 10 s after the client left, its usage known and no drain slot free")
	}
	e := st.sink.event(t, r2.Header.Get("X-Request-Id"))
	if e.Usage.CompletionTokens != 5 || !strings.Contains(e.Error, "no drain slot") {
		t.Fatalf("event %s %s %+v (%q), want the provider's 5 and an error naming the drain slots", e.Status, e.UsageSource, e.Usage, e.Error)
	}
}

// TestResponsesErrorFrameNamedByItsEvent (a review): an `event: error`
// frame whose data does not say "type":"error" was neither recorded as an
// error nor scrubbed of the upstream's key.
func TestResponsesErrorFrameNamedByItsEvent(t *testing.T) {
	body := anthEv("response.created", `{"type":"response.created","response":{"status":"in_progress","model":"m"}}`) +
		anthEv("error", `{"error":{"code":"invalid_api_key","message":"Incorrect API key provided: sk-up-123456789"}}`)
	st := oneProviderStack(t, "openai", jsonUpstream(t, "text/event-stream", body).URL)
	r := st.post(t, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	b, _ := readAllErr(r)
	e := st.sink.event(t, r.Header.Get("X-Request-Id"))
	if strings.Contains(string(b), "sk-up-123456789") || e.Status != usage.StatusUpstreamError {
		t.Fatalf("the client got\n%s\nevent %s (%q); want the key redacted and an upstream_error", b, e.Status, e.Error)
	}
}

// TestALoweredReportIsNotBilledBelowWhatTheClientRead (a review): a
// message_delta that lowers the count (cumulative counts never fall) came
// after the client had read the higher one, and the event billed the
// lower. It is not relayed now, and the event keeps the higher report.
func TestALoweredReportIsNotBilledBelowWhatTheClientRead(t *testing.T) {
	for _, c := range []struct{ name, between string }{{"after a ping", anthEv("ping", `{"type":"ping"}`)}, {"back to back", ""}} {
		t.Run(c.name, func(t *testing.T) {
			body := anthText + anthDeltaN(50) + c.between + anthDeltaN(5) + anthEv("message_stop", `{"type":"message_stop"}`)
			got, e, _ := anthRelay(t, body)
			if !strings.Contains(got, `"output_tokens":50}`) || e.Usage.CompletionTokens < 50 || strings.Contains(got, `"output_tokens":5}`) {
				t.Fatalf("the client got\n%s\nevent %s %s %+v; want the 50 read and billed, the lowered 5 not relayed", got, e.Status, e.UsageSource, e.Usage)
			}
		})
	}
}

// TestResponsesTextInAFrameNamedErrorIsCounted (a review): a frame named
// `event: error` whose data is a text delta is an error, and its text,
// which a client reading the data shows, is still counted.
func TestResponsesTextInAFrameNamedErrorIsCounted(t *testing.T) {
	body := anthEv("response.created", `{"type":"response.created","response":{"status":"in_progress","model":"m"}}`) +
		anthEv("response.output_text.delta", `{"type":"response.output_text.delta","delta":"hi"}`) +
		anthEv("error", `{"type":"response.output_text.delta","delta":"`+revWords+`"}`)
	st := oneProviderStack(t, "openai", jsonUpstream(t, "text/event-stream", body).URL)
	e, got := doRequest(t, st, "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	if words := strings.Count(got, "word "); words == 0 || int64(words) > e.Usage.CompletionTokens || e.Status != usage.StatusUpstreamError {
		t.Fatalf("client read %d words; event %s, %d completion tokens", words, e.Status, e.Usage.CompletionTokens)
	}
}

// TestALoweredReportLeavesTheFinishReason (a review): the event kept the
// usage from before a lowered report, but took its stop reason.
func TestALoweredReportLeavesTheFinishReason(t *testing.T) {
	d1 := anthEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":50}}`)
	d2 := anthEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`)
	body := anthText + d1 + d2 + anthEv("message_stop", `{"type":"message_stop"}`)
	got, e, _ := anthRelay(t, body)
	if strings.Contains(got, "end_turn") || e.FinishReason != "length" || e.Usage.CompletionTokens != 50 {
		t.Fatalf("the client got\n%s\nevent finish %q, %+v; want length and 50, as the report the client read", got, e.FinishReason, e.Usage)
	}
}

// TestAnUnreadableReportCannotLowerTheCount (a review): a message_delta
// with a count the tap cannot read is no final report, but its readable
// counts still replaced the usage: it lowered the count quietly, and the
// next readable report was compared with the lowered figure (the client
// read 50 output tokens, 5 were billed).
func TestAnUnreadableReportCannotLowerTheCount(t *testing.T) {
	body := anthText + anthDeltaN(50) +
		anthEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5,"input_tokens":-1}}`) +
		anthEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5,"input_tokens":3}}`) +
		anthEv("message_stop", `{"type":"message_stop"}`)
	got, e, _ := anthRelay(t, body)
	if !strings.Contains(got, `"output_tokens":50}`) || e.Usage.CompletionTokens < 50 || strings.Contains(got, `"output_tokens":5,`) {
		t.Fatalf("the client got\n%s\nevent %s %s %+v; want the 50 read and billed, no lowered report relayed", got, e.Status, e.UsageSource, e.Usage)
	}
}

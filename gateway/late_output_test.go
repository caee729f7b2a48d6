package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// An upstream that sends its final usage report and then streams more
// output (an attacker's upstream, or a broken one) must not have that
// output relayed unbilled (an attacker review: 5 completion tokens billed
// "upstream" for 10,000 words relayed).

// lateWords is the text each late event carries: 200 words.
var lateWords = strings.Repeat("word ", 200)

// TestOutputAfterFinalUsageIsBilled: on the chat route, which commits the
// event at the stream's end, output after the usage chunk raises
// completion_tokens to the tokenizer's count of all the output, flagged
// partial.
func TestOutputAfterFinalUsageIsBilled(t *testing.T) {
	chunk := func(content string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}]}` + "\n\n"
	}
	body := chunk("hi") +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}` + "\n\n" +
		strings.Repeat(chunk(lateWords), 50) + "data: [DONE]\n\n"
	st := oneProviderStack(t, "openai", jsonUpstream(t, "text/event-stream", body).URL)
	for _, include := range []bool{false, true} {
		req := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		if include {
			req = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		}
		e, got := doRequest(t, st, "/v1/chat/completions", req, "Authorization", "Bearer "+testKey)
		words := strings.Count(got, "word ")
		if words < 10000 {
			t.Fatalf("include_usage %v: the client got %d words of 10,000", include, words)
		}
		if e.Usage.CompletionTokens < int64(words) || e.Usage.PromptTokens != 10 || e.UsageSource != usage.SourcePartial {
			t.Fatalf("include_usage %v: billed %+v (%s) for %d words relayed after the final report; want them counted, partial",
				include, e.Usage, e.UsageSource, words)
		}
	}
}

// TestNormalStreamsStayUpstream: the check above leaves the usual
// streams alone: a usage chunk last, or usage on the finish chunk with
// its content, bills the provider's figures as sent.
func TestNormalStreamsStayUpstream(t *testing.T) {
	for name, body := range map[string]string{
		"usage chunk last": `data: {"choices":[{"index":0,"delta":{"content":"` + lateWords + `"}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":7}}` + "\n\ndata: [DONE]\n\n",
		"usage on the last content chunk": `data: {"choices":[{"index":0,"delta":{"content":"` + lateWords + `"}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"content":"` + lateWords + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":7}}` + "\n\ndata: [DONE]\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			st := oneProviderStack(t, "openai", jsonUpstream(t, "text/event-stream", body).URL)
			e, _ := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+testKey)
			if want := (usage.Tokens{PromptTokens: 10, CompletionTokens: 7}); e.Usage != want || e.UsageSource != usage.SourceUpstream {
				t.Fatalf("billed %+v (%s), want %+v upstream", e.Usage, e.UsageSource, want)
			}
		})
	}
}

// anthropicLate is an Anthropic stream whose message_delta (the final
// report: 5 output tokens) is followed by three more text deltas.
func anthropicLate() string {
	evs := []string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`,
	}
	for range 3 {
		evs = append(evs, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+lateWords+`"}}`)
	}
	evs = append(evs, `event: message_stop`+"\n"+`data: {"type":"message_stop"}`)
	return strings.Join(evs, "\n\n") + "\n\n"
}

// TestAnthropicOutputAfterMessageDelta: on the native route, which makes
// the event durable at the event after message_delta, that event's output
// is billed and the stream is broken off at the next one, whose output
// the event does not hold: the client never gets output that is not
// billed. On the chat route (translated, committed at the end) all of it
// is billed.
func TestAnthropicOutputAfterMessageDelta(t *testing.T) {
	st := oneProviderStack(t, "anthropic", jsonUpstream(t, "text/event-stream", anthropicLate()).URL)

	resp := st.post(t, "/anthropic/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", testKey)
	b, err := readAllErr(resp)
	e := st.sink.event(t, resp.Header.Get("X-Request-Id"))
	words := strings.Count(string(b), "word ")
	if err == nil || strings.Contains(string(b), "message_stop") || words > 200 {
		t.Fatalf("native: read error %v, %d late words relayed, message_stop relayed %v; want the stream broken off after one late event",
			err, words, strings.Contains(string(b), "message_stop"))
	}
	if e.Usage.CompletionTokens < int64(words) || e.Usage.CompletionTokens < 5 || e.UsageSource != usage.SourcePartial {
		t.Fatalf("native: billed %+v (%s) with %d late words relayed; want them counted, partial", e.Usage, e.UsageSource, words)
	}

	e, got := doRequest(t, st, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+testKey)
	words = strings.Count(got, "word ")
	if e.Usage.CompletionTokens < int64(words) || e.UsageSource != usage.SourcePartial {
		t.Fatalf("chat: billed %+v (%s) with %d late words relayed; want them counted, partial", e.Usage, e.UsageSource, words)
	}
}

// readAllErr reads resp's body to its end and closes it, returning what
// arrived and the error that ended the read (nil at a clean end).
func readAllErr(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

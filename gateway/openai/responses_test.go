package openai

import (
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// responsesStream taps a Responses API stream of the given events' data
// (each with its "type" as the event's name) and returns the report.
func responsesStream(t *testing.T, events ...string) *tap.Report {
	t.Helper()
	var r tap.Report
	var rt ResponsesTap
	for _, data := range events {
		rt.Event(&sse.Event{Data: []byte(data), HasData: true}, &r)
	}
	return &r
}

// TestResponsesUsageWithAnUnreadableCachedCountIsNoReport: a usage object
// whose cached_tokens cannot be read as a count (a word, a fraction) is no
// report, streamed or not: the usage is estimated, not billed with the
// subset at -1.
func TestResponsesUsageWithAnUnreadableCachedCountIsNoReport(t *testing.T) {
	for _, cached := range []string{`"many"`, `1.5`, `-3`} {
		response := `{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],` +
			`"usage":{"input_tokens":10,"output_tokens":5,"input_tokens_details":{"cached_tokens":` + cached + `}}}`
		var body tap.Report
		if err := ResponsesBody([]byte(response), &body); err != nil {
			t.Fatal(err)
		}
		streamed := responsesStream(t, `{"type":"response.completed","response":`+response+`}`)
		for name, r := range map[string]*tap.Report{"body": &body, "stream": streamed} {
			if r.Reported || r.Final {
				t.Errorf("%s, cached_tokens %s: reported %+v (final %v), want no report", name, cached, r.Usage, r.Final)
			}
		}
	}
}

// TestResponsesAudioDeltasAreNotText: response.audio.delta carries base64
// audio, not text the model wrote: it is not counted as output (an
// estimate of it billed the encoding's bytes as tokens).
func TestResponsesAudioDeltasAreNotText(t *testing.T) {
	r := responsesStream(t, `{"type":"response.audio.delta","delta":"UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="}`,
		`{"type":"response.output_text.delta","delta":"hi"}`)
	if got := r.Output.String(); got != "hi" {
		t.Fatalf("output %q, want only the text delta's %q", got, "hi")
	}
}

// TestResponsesErrorNamedByItsEventAlone: an event named "error" is an
// upstream error whatever its data says: a data of another type, or none
// that is JSON, ends the stream as failed ("error"), its text still
// counted as output.
func TestResponsesErrorNamedByItsEventAlone(t *testing.T) {
	for _, data := range []string{`{"type":"response.output_text.delta","delta":"hi"}`, `overloaded`} {
		var r tap.Report
		var rt ResponsesTap
		rt.Event(&sse.Event{Type: []byte("error"), Data: []byte(data), HasData: true}, &r)
		if r.Error == "" || r.FinishReason != "error" {
			t.Errorf("%s: error %q, finish %q; want an upstream error, finish error", data, r.Error, r.FinishReason)
		}
	}
}

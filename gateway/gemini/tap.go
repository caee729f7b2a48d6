package gemini

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// maxRaw bounds the raw (not data:-framed) body a Tap accumulates while
// waiting for it to become a whole JSON value. Error bodies are small.
const maxRaw = 32 << 10

// Tap reads usage from a streamGenerateContent?alt=sse stream, event by
// event, into a tap.Report:
//
//   - usageMetadata (on every chunk, cumulative) replaces r.Usage as a whole,
//     normalized as described in the package documentation; r.Reported is
//     set by any usageMetadata, and r.Final by usageMetadata on a chunk whose
//     candidate has a finishReason, or on a later chunk. Counts are read
//     leniently (see count); a usageMetadata with a billed count that still
//     cannot be read ("abc", 1.5, -3) is ignored, as if the chunk had none:
//     it neither replaces the last report nor makes it final, so such a
//     stream resolves as partial, or estimated. A prompt blocked
//     outright (promptFeedback.blockReason, no candidates) counts as
//     finished, with finish reason "content_filter".
//   - finishReason sets r.FinishReason (see finishReason); modelVersion sets
//     r.ServedModel; text parts (thought summaries included) and function
//     call names and arguments go to r.AddOutput.
//   - An error, either a data: frame {"error":{"code","message","status"}}
//     or a raw JSON error body that is not data:-framed (Vertex AI sends
//     one mid-stream, possibly pretty-printed over several lines, which
//     arrive in sse.Event.Other), sets r.Error, and r.FinishReason to
//     "error".
//
// A raw body is accumulated across events until it is one whole JSON
// value; a raw array or object of responses is tapped like data frames.
// The zero Tap is ready to use; a Tap serves one stream and keeps no
// reference to the events it sees. It never panics, whatever the input.
type Tap struct {
	calls    bool   // a functionCall part was seen: STOP means tool_calls
	finished bool   // a finishReason (or blockReason) was seen
	raw      []byte // pending raw lines from Event.Other
	payloads [][]byte
	resps    []response
	scan     scanner
}

// Event taps one SSE event of the stream into r.
func (t *Tap) Event(ev *sse.Event, r *tap.Report) { t.event(ev, r, true) }

// event is Event, its chunks read through the fast scanner or not.
func (t *Tap) event(ev *sse.Event, r *tap.Report, fast bool) {
	t.payloads = t.collect(ev, t.payloads[:0])
	for _, p := range t.payloads {
		t.decode(p, fast)
		for i := range t.resps {
			t.observe(&t.resps[i], r)
		}
	}
	t.release()
}

// decode sets t.resps to the responses p holds: with fast, through t.scan
// when it can read p, which is nearly always a single chunk; else through
// decode (encoding/json: what tests compare the fast path with). They are
// valid until the next call, or until release.
func (t *Tap) decode(p []byte, fast bool) {
	t.resps = t.resps[:0]
	if b := bytes.TrimSpace(p); fast && len(b) > 0 && b[0] == '{' {
		t.resps = append(t.resps, response{})
		if t.scan.response(b, &t.resps[0]) {
			return
		}
		t.resps = t.resps[:0] // decode appends a fresh response{}
	}
	t.resps = decode(p, t.resps)
}

// release drops the references of the decoded responses once tapped.
func (t *Tap) release() {
	clear(t.resps)
	t.scan.release()
}

// collect appends the JSON values ev completes to dst: its data, and the raw
// body accumulated from Other once it is whole. The slices are valid until
// the next call.
func (t *Tap) collect(ev *sse.Event, dst [][]byte) [][]byte {
	if d := bytes.TrimSpace(ev.Data); ev.HasData && len(d) > 0 && (d[0] == '{' || d[0] == '[') {
		dst = append(dst, d)
	}
	if len(ev.Other) == 0 {
		return dst
	}
	switch {
	case (ev.Other[0] == '{' || ev.Other[0] == '[') && (len(t.raw) == 0 || t.raw[0] != '['):
		// A value starting at the beginning of a line is a new body (the
		// inner lines of a pretty-printed object are indented), unless it
		// is the next element of a pending array: whatever was pending
		// will never be whole.
		t.raw = t.raw[:0]
	case len(t.raw) > 0:
		t.raw = append(t.raw, '\n')
	}
	t.raw = append(t.raw, ev.Other...)
	// Skip anything before the JSON starts (a stray status line, say).
	if i := bytes.IndexAny(t.raw, "{["); i > 0 {
		t.raw = t.raw[:copy(t.raw, t.raw[i:])]
	} else if i < 0 {
		t.raw = t.raw[:0]
	}
	// A whole value ends in '}' or ']': validate only then, so that a body
	// arriving line by line is not rescanned at every line.
	last := bytes.TrimRight(t.raw, " \t\r\n")
	switch {
	case len(last) > 0 && (last[len(last)-1] == '}' || last[len(last)-1] == ']') && json.Valid(t.raw):
		dst = append(dst, t.raw)
		t.raw = t.raw[:0] // still valid for the caller: nothing appends before the next call
	case len(t.raw) > maxRaw:
		t.raw = t.raw[:0]
	}
	return dst
}

// observe taps one decoded response into r.
func (t *Tap) observe(resp *response, r *tap.Report) {
	if resp.ModelVersion != "" && resp.ModelVersion != r.ServedModel {
		r.ServedModel = clean(resp.ModelVersion, 200)
	}
	reason := ""
	r.AddOutputBytes(resp.shadow) // a chunk whose output a client may read otherwise (see shadowed)
	for i := range resp.Candidates {
		c := &resp.Candidates[i]
		for j := range c.Content.Parts {
			p := &c.Content.Parts[j]
			if p.Thought {
				r.AddReasoning(p.Text)
			} else {
				r.AddOutput(p.Text)
			}
			if fc := p.FunctionCall; fc != nil {
				t.calls = true
				r.AddOutput(fc.Name)
				r.AddOutput(string(fc.Args))
			}
			for _, c := range [2]*codePart{p.ExecutableCode, p.CodeExecutionResult} {
				if c != nil {
					r.AddOutput(c.Code)
					r.AddOutput(c.Output)
				}
			}
		}
		if c.FinishReason != "" {
			reason = finishReason(c.FinishReason, t.calls)
		}
	}
	if reason == "" && len(resp.Candidates) == 0 && resp.PromptFeedback != nil && resp.PromptFeedback.BlockReason != "" {
		reason = "content_filter"
	}
	if reason != "" {
		t.finished = true
		if r.Error == "" {
			r.FinishReason = reason
		}
	}
	if u := resp.UsageMetadata; u != nil {
		r.Cumulative = true // a later chunk's usageMetadata replaces this one
		if u.readable() {
			r.SetUsage(u.meter())
			if t.finished {
				r.MarkFinal()
			}
		}
	}
	if desc, _ := errorOf(resp.Error); desc != "" {
		r.Error, r.FinishReason = desc, "error"
	}
}

// usageKeys are the members of a usageMetadata object the tap reads (see
// tap.AmbiguousUsage).
var usageKeys = tap.UsageKeys{
	"promptTokenCount": nil, "cachedContentTokenCount": nil, "candidatesTokenCount": nil,
	"toolUsePromptTokenCount": nil, "thoughtsTokenCount": nil, "totalTokenCount": nil,
}

// ErrNoResponse is returned by BodyUsage and Chat.Body for a body that
// holds no GenerateContentResponse.
var ErrNoResponse = errors.New("gemini: body is not a GenerateContentResponse")

// BodyUsage taps the usage of a non-streamed generateContent response into
// r, by the rules of Tap. It also accepts a JSON array of responses, which
// streamGenerateContent returns without alt=sse; the last usageMetadata in
// it is the one that counts. A whole generateContent response is complete,
// so its usageMetadata is final even without a finishReason. An error body
// ({"error":{...}}) sets r.Error and r.FinishReason "error" and returns nil.
// It returns ErrNoResponse when body is not a JSON object or array.
func BodyUsage(body []byte, r *tap.Report) error {
	_, err := tapBody(body, r)
	return err
}

// tapBody decodes a whole body, taps it into r and returns its responses.
// An object goes through the scanner first, as a stream's chunks do: what
// it reads holds no key spelled otherwise, so decode's search for one
// (shadowed, which costs several decodes) is spent only on the rest.
func tapBody(body []byte, r *tap.Report) ([]response, error) {
	var t Tap // not released: the responses are the caller's
	t.decode(body, true)
	resps := t.resps
	if len(resps) == 0 {
		return nil, ErrNoResponse
	}
	for i := range resps {
		t.observe(&resps[i], r)
	}
	if b := bytes.TrimSpace(body); b[0] == '{' {
		r.Final = r.Final || r.Reported
		r.AmbiguousUsage = tap.AmbiguousUsage(b, "usageMetadata", usageKeys)
	}
	return resps, nil
}

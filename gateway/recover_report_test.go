package gateway_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRecoverDoesNotScaleTheProvidersReport: a stream whose provider
// reports cumulative usage with its chunks streamed 2 MiB (524,288 "tok "
// tokens, as the provider's last report, journaled with the last
// checkpoint, says) when the gateway was killed. The journal keeps
// MaxOutput (1 MiB) of the output and its full length. Recover took the
// provider's count (it covers all the output journaled) and then scaled it
// by OutputLen/kept, a correction meant for an estimate made from the kept
// bytes alone: the crashed request was billed twice the provider's count.
func TestRecoverDoesNotScaleTheProvidersReport(t *testing.T) {
	st := newStack(t, nil)
	dir := t.TempDir()
	j, _, err := journal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := begun("0197a3c2-0000-7000-8000-0000000000aa", "/v1/chat/completions")
	body := []byte(`{"model":"sim-pro","stream":true,"messages":[{"role":"user","content":"word word word"}]}`)
	j.Begin(&e, body)
	chunk := strings.Repeat("tok ", 64<<10) // 256 KiB, 65,536 tokens
	var streamed int64
	for range 8 { // 2 MiB in all
		streamed += 64 << 10
		j.Checkpoint(e.ID, chunk, "", &usage.Tokens{PromptTokens: 10, CompletionTokens: streamed}, false)
	}
	if err := j.Close(); err != nil { // a kill -9: the request never ended
		t.Fatal(err)
	}
	_, reqs, err := journal.Open(dir)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("recovered %d requests (%v)", len(reqs), err)
	}
	r := reqs[0]
	t.Logf("journaled: %d bytes of output (%d kept), provider's last report %+v", r.OutputLen, len(r.Output), *r.Reported)
	ev := st.gw.Recover(reqs)[0]
	// The tokenizer's count of the output, scaled, may differ by a token
	// or two (it takes the greater); twice the count is the bug.
	if ev.Usage.CompletionTokens < streamed || ev.Usage.CompletionTokens > streamed+streamed/100 {
		t.Errorf("crashed request billed %d completion tokens (%s); the provider counted %d for all %d bytes streamed",
			ev.Usage.CompletionTokens, ev.UsageSource, streamed, r.OutputLen)
	}
}

// TestRecoverScalesAnEstimateOfOutputPastTheJournalsLimit: a stream with no
// usage report streamed 2 MiB (524,288 "tok " tokens), all of it reasoning
// shown as text, when the gateway was killed. The journal keeps MaxOutput
// (1 MiB) of the output and of the reasoning, and their full lengths:
// Recover's estimate counts the kept bytes and scales the count to the
// whole. No test caught the count left unscaled: the crashed request was
// billed half the tokens it streamed.
func TestRecoverScalesAnEstimateOfOutputPastTheJournalsLimit(t *testing.T) {
	st := newStack(t, nil)
	dir := t.TempDir()
	j, _, err := journal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := begun("0197a3c2-0000-7000-8000-0000000000ab", "/v1/chat/completions")
	body := []byte(`{"model":"sim-pro","stream":true,"messages":[{"role":"user","content":"word word word"}]}`)
	j.Begin(&e, body)
	chunk := strings.Repeat("tok ", 64<<10) // 256 KiB, 65,536 tokens
	const streamed = 8 * 64 << 10           // 2 MiB in all
	for range 8 {
		j.Checkpoint(e.ID, chunk, chunk, nil, true)
	}
	if err := j.Close(); err != nil { // a kill -9: the request never ended
		t.Fatal(err)
	}
	_, reqs, err := journal.Open(dir)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("recovered %d requests (%v)", len(reqs), err)
	}
	r := reqs[0]
	if r.Reported != nil || len(r.Output) >= r.OutputLen || len(r.Reasoning) >= r.ReasoningLen {
		t.Fatalf("journaled %d of %d bytes of output, %d of %d of reasoning, report %v; want a part of each kept, and no report",
			len(r.Output), r.OutputLen, len(r.Reasoning), r.ReasoningLen, r.Reported)
	}
	ev := st.gw.Recover(reqs)[0]
	if ev.UsageSource != usage.SourceEstimated ||
		ev.Usage.CompletionTokens < streamed || ev.Usage.CompletionTokens > streamed+streamed/100 ||
		ev.Usage.ReasoningTokens < streamed || ev.Usage.ReasoningTokens > ev.Usage.CompletionTokens {
		t.Errorf("crashed request billed %d completion tokens, %d of them reasoning (%s); it streamed %d, all reasoning",
			ev.Usage.CompletionTokens, ev.Usage.ReasoningTokens, ev.UsageSource, streamed)
	}
}

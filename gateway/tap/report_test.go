package tap

import (
	"math"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

func TestResolve(t *testing.T) {
	est, err := NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	if n := est.Count("hello world"); n != 2 {
		t.Fatalf("Count(hello world) = %d, want 2 (o200k_base)", n)
	}
	var final Report
	final.Usage, final.Reported, final.Final = usage.Tokens{PromptTokens: 5, CompletionTokens: 1}, true, true
	final.AddOutput("many many words that would count for more than one token")
	if u, src := final.Resolve(est, Text("prompt")); src != usage.SourceUpstream || u.CompletionTokens != 1 {
		t.Fatalf("final: %+v %s", u, src)
	}
	partial := Report{Usage: usage.Tokens{PromptTokens: 17, CompletionTokens: 1}, Reported: true}
	partial.AddOutput("hello world, again and again")
	if u, src := partial.Resolve(est, Text("ignored")); src != usage.SourcePartial || u.PromptTokens != 17 || u.CompletionTokens != est.Count("hello world, again and again") {
		t.Fatalf("partial: %+v %s", u, src)
	}
	partial.Usage.CompletionTokens = 1000
	if u, _ := partial.Resolve(est, Text("")); u.CompletionTokens != 1000 {
		t.Fatalf("partial keeps the larger provider figure: %+v", u)
	}
	failed := Report{Error: "overloaded"}
	if u, src := failed.Resolve(est, Text("a long prompt")); src != usage.SourceEstimated || u != (usage.Tokens{}) {
		t.Fatalf("failed with no output: %+v %s, want nothing billed", u, src)
	}
	var none Report
	none.AddOutput("hello world")
	if u, src := none.Resolve(est, Text("hello world")); src != usage.SourceEstimated || u.PromptTokens != 2 || u.CompletionTokens != 2 {
		t.Fatalf("estimated: %+v %s", u, src)
	}
}

// TestResolveCumulativeReporter: a provider that reported cumulative usage
// with the last output it sent has counted that output itself; only output
// after its last report calls for the tokenizer.
func TestResolveCumulativeReporter(t *testing.T) {
	est, err := NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	r.AddOutput("tok tok tok ") // the tokenizer counts 4 (the trailing space)
	r.SetUsage(usage.Tokens{PromptTokens: 5, CompletionTokens: 3})
	if u, src := r.Resolve(est, Text("")); src != usage.SourcePartial || u.CompletionTokens != 3 {
		t.Fatalf("covered output: %+v %s, want the provider's 3", u, src)
	}
	r.AddOutput("tok tok ")
	if u, _ := r.Resolve(est, Text("")); u.CompletionTokens != est.Count("tok tok tok tok tok ") {
		t.Fatalf("output after the report: %+v, want the tokenizer's count of all output", u)
	}
}

// TestResolveEstimatesWhatAReportCannotLack: a report that counts no
// completion tokens though output came, or no prompt tokens though the
// provider produced output, is no bill: what it lacks is estimated and the
// source is partial. A report of zeros with no output stands.
func TestResolveEstimatesWhatAReportCannotLack(t *testing.T) {
	est, err := NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	prompt := Text("How many tokens does the ledger hold today?")
	out := "It holds every token, exactly once, in an append-only table."
	for _, c := range []struct {
		name       string
		usage      usage.Tokens
		output     string
		final      bool
		wantSource usage.Source
		estPrompt  bool
		estOutput  bool
	}{
		{"zeros, no output", usage.Tokens{}, "", true, usage.SourceUpstream, false, false},
		{"zeros after output", usage.Tokens{}, out, true, usage.SourcePartial, true, true},
		{"prompt alone after output", usage.Tokens{PromptTokens: 9}, out, true, usage.SourcePartial, false, true},
		{"negative completion after output", usage.Tokens{PromptTokens: 9, CompletionTokens: -5}, out, true, usage.SourcePartial, false, true},
		{"completion alone", usage.Tokens{CompletionTokens: 12}, out, true, usage.SourcePartial, true, false},
		{"a whole report", usage.Tokens{PromptTokens: 9, CompletionTokens: 3}, out, true, usage.SourceUpstream, false, false},
		{"zeros after output, not final", usage.Tokens{}, out, false, usage.SourcePartial, true, true},
	} {
		var r Report
		r.AddOutput(c.output)
		r.SetUsage(c.usage)
		r.Final = c.final
		got, src := r.Resolve(est, prompt)
		if src != c.wantSource {
			t.Errorf("%s: source %s, want %s", c.name, src, c.wantSource)
		}
		wantPrompt, wantOut := c.usage.PromptTokens, c.usage.CompletionTokens
		if c.estPrompt {
			wantPrompt = est.Prompt(prompt())
		}
		if c.estOutput {
			wantOut = est.Count(c.output)
		}
		if got.PromptTokens != wantPrompt || got.CompletionTokens != wantOut {
			t.Errorf("%s: %d prompt, %d completion; want %d, %d", c.name, got.PromptTokens, got.CompletionTokens, wantPrompt, wantOut)
		}
	}
}

// TestLateOutputAfterAHugeReportSaturates: output after a final report
// whose completion is near int64's limit (a hostile upstream's) is added
// saturating: the completion billed stays the largest count, not one
// wrapped negative (which the meter clamps to nothing billed).
func TestLateOutputAfterAHugeReportSaturates(t *testing.T) {
	est, err := NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	r.AddOutput("hi")
	r.SetUsage(usage.Tokens{PromptTokens: 5, CompletionTokens: math.MaxInt64 - 1})
	r.MarkFinal()
	r.AddOutput(" and more words after the final report")
	if u, src := r.Resolve(est, Text("")); u.CompletionTokens != math.MaxInt64 || src != usage.SourcePartial {
		t.Fatalf("billed %+v (%s), want %d completion tokens, partial", u, src, int64(math.MaxInt64))
	}
}

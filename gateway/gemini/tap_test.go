package gemini

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestTapFixtures replays every recorded Gemini stream through Tap and
// checks the resolved usage against expected.json.
func TestTapFixtures(t *testing.T) {
	_, recs := geminiFixtures(t)
	est := estimator(t)
	for _, rec := range recs {
		t.Run(rec.Name, func(t *testing.T) {
			want := rec.Want // every stream has one: geminiFixtures fails otherwise
			r := tapStream(t, rec.Raw)
			got, source := r.Resolve(est, tap.Text(""))
			if source != want.Source {
				t.Fatalf("usage_source %q, want %q", source, want.Source)
			}
			if (r.Error != "") != want.UpstreamError {
				t.Errorf("error %q, want upstream_error=%v", r.Error, want.UpstreamError)
			}
			switch source {
			case usage.SourceUpstream:
				wantU := usage.Tokens{PromptTokens: want.PromptTokens, CachedTokens: want.CachedTokens,
					CacheWriteTokens: want.CacheWriteTokens, CompletionTokens: want.CompletionTokens,
					ReasoningTokens: want.ReasoningTokens}
				if got != wantU || got.Total() != want.TotalTokens {
					t.Errorf("usage %+v (total %d), want %+v (total %d)", got, got.Total(), wantU, want.TotalTokens)
				}
			case usage.SourceEstimated:
				if got.PromptTokens < 0 || got.CompletionTokens < 0 || got.CompletionTokens == 0 {
					t.Errorf("estimate %+v: want non-negative, with the streamed output counted", got)
				}
			}
		})
	}
}

// TestTapFixtureDetails checks what expected.json does not say.
func TestTapFixtureDetails(t *testing.T) {
	dir, _ := geminiFixtures(t)
	r := tapStream(t, readFixture(t, dir, "gemini/gemini3-function-call-thoughts.sse"))
	if r.FinishReason != "tool_calls" || r.ServedModel != "gemini-3-pro-preview" || !strings.Contains(r.Output.String(), "get_country") {
		t.Errorf("function call stream: finish %q, model %q, output %q", r.FinishReason, r.ServedModel, r.Output.String())
	}
	r = tapStream(t, readFixture(t, dir, "gemini/vertex-error-mid-stream.sse"))
	if r.FinishReason != "error" || !strings.Contains(r.Error, "CANCELLED") || !strings.Contains(r.Error, "cancelled") ||
		r.Output.String() != "First Second " || r.Reported {
		t.Errorf("vertex error: %q finish %q output %q reported %v", r.Error, r.FinishReason, r.Output.String(), r.Reported)
	}
	r = tapStream(t, readFixture(t, dir, "gemini/flash2-prompt-count-changes.sse"))
	if r.Usage.PromptTokens != 13 || r.FinishReason != "stop" || !r.Final {
		t.Errorf("prompt count changes: %+v finish %q final %v", r.Usage, r.FinishReason, r.Final)
	}
}

// TestBodyUsageImplicitCaching checks cachedContentTokenCount on the one
// recorded response that has it: a subset of prompt_tokens.
func TestBodyUsageImplicitCaching(t *testing.T) {
	dir, _ := geminiFixtures(t)
	var r tap.Report
	if err := BodyUsage(readFixture(t, dir, "gemini/NONSTREAM-unary-implicit-caching.json"), &r); err != nil {
		t.Fatal(err)
	}
	want := usage.Tokens{PromptTokens: 12013, CachedTokens: 11243, CompletionTokens: 15 + 73, ReasoningTokens: 73}
	if r.Usage != want || !r.Final || r.FinishReason != "stop" || r.ServedModel != "gemini-2.5-flash" {
		t.Errorf("got %+v final %v finish %q model %q, want %+v", r.Usage, r.Final, r.FinishReason, r.ServedModel, want)
	}
	if r.Usage.CachedTokens > r.Usage.PromptTokens {
		t.Error("cached tokens must be inside prompt tokens")
	}
}

func TestTap(t *testing.T) {
	const fin = `"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":`
	tests := []struct {
		name, stream string
		want         usage.Tokens
		reported     bool
		final        bool
		finish, err  string
	}{
		{"tool use prompt is input",
			`data: {` + fin + `"STOP"}],"usageMetadata":{"promptTokenCount":10,"toolUsePromptTokenCount":5,"candidatesTokenCount":3,"thoughtsTokenCount":2,"cachedContentTokenCount":4}}` + "\n\n",
			usage.Tokens{PromptTokens: 15, CachedTokens: 4, CompletionTokens: 5, ReasoningTokens: 2}, true, true, "stop", ""},
		{"last usage wins, not the sum nor the max",
			"data: {\"usageMetadata\":{\"promptTokenCount\":20,\"candidatesTokenCount\":9}}\n\ndata: {" + fin + `"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":18,"candidatesTokenCount":7}}` + "\n\n",
			usage.Tokens{PromptTokens: 18, CompletionTokens: 7}, true, true, "length", ""},
		{"usage without finish is not final",
			"data: {\"usageMetadata\":{\"promptTokenCount\":2}}\n\n",
			usage.Tokens{PromptTokens: 2}, true, false, "", ""},
		{"finish without usage, then usage: final",
			"data: {" + fin + "\"SAFETY\"}]}\n\ndata: {\"usageMetadata\":{\"promptTokenCount\":2,\"candidatesTokenCount\":1}}\n\n",
			usage.Tokens{PromptTokens: 2, CompletionTokens: 1}, true, true, "content_filter", ""},
		{"blocked prompt",
			`data: {"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":7}}` + "\n\n",
			usage.Tokens{PromptTokens: 7}, true, true, "content_filter", ""},
		{"unknown finish reason",
			"data: {" + fin + `"MALFORMED_FUNCTION_CALL"}],"usageMetadata":{"promptTokenCount":1}}` + "\n\n",
			usage.Tokens{PromptTokens: 1}, true, true, "stop", ""},
		{"sums saturate",
			"data: {" + fin + `"STOP"}],"usageMetadata":{"promptTokenCount":0,"candidatesTokenCount":5,"thoughtsTokenCount":9223372036854775807,"toolUsePromptTokenCount":3}}` + "\n\n",
			usage.Tokens{PromptTokens: 3, CompletionTokens: 9223372036854775807, ReasoningTokens: 9223372036854775807}, true, true, "stop", ""},
		{"counts as proto3 JSON may write them: strings, exponents, integral fractions",
			"data: {" + fin + `"STOP"}],"usageMetadata":{"promptTokenCount":"11","cachedContentTokenCount":"1e1","candidatesTokenCount":1.5e2,"thoughtsTokenCount":20.0,"toolUsePromptTokenCount":-0,"totalTokenCount":"x"}}` + "\n\n",
			usage.Tokens{PromptTokens: 11, CachedTokens: 10, CompletionTokens: 170, ReasoningTokens: 20}, true, true, "stop", ""},
		{"a negative count is no report",
			"data: {" + fin + `"STOP"}],"usageMetadata":{"promptTokenCount":-1,"candidatesTokenCount":5}}` + "\n\n",
			usage.Tokens{}, false, false, "stop", ""},
		{"error data frame",
			"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]}\n\n" +
				`data: {"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}` + "\n\n",
			usage.Tokens{}, false, false, "error", "gemini error 429 RESOURCE_EXHAUSTED: Resource has been exhausted"},
		{"raw one-line error body",
			`{"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}` + "\n",
			usage.Tokens{}, false, false, "error", "gemini error 500 INTERNAL: Internal error encountered."},
		{"raw error body split by a blank line, after a status line",
			"HTTP/1.1 503\n{\n\n  \"error\": {\"code\": \"503\", \"message\": \"overloaded\"}\n}\n",
			usage.Tokens{}, false, false, "error", "gemini error 503: overloaded"},
		{"error text fit for the ledger: no NUL, valid UTF-8",
			"data: {\"error\":{\"code\":\"\xff\",\"message\":\"a\\u0000b\"}}\n\n",
			usage.Tokens{}, false, false, "error", "gemini error \uFFFD: ab"},
		{"a broken raw body does not hide the next one",
			"{\"error\": {\"code\": 500,\n\n" + `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}` + "\n",
			usage.Tokens{}, false, false, "error", "gemini error 503 UNAVAILABLE: overloaded"},
		{"a raw pretty-printed array of responses (alt=sse ignored)",
			"[{\n  \"usageMetadata\": {\"promptTokenCount\": 2}\n}\n,\r\n{\n  " + fin + `"STOP"}],` + "\n  \"usageMetadata\": {\"promptTokenCount\": 2, \"candidatesTokenCount\": 1}\n}\n]",
			usage.Tokens{PromptTokens: 2, CompletionTokens: 1}, true, true, "stop", ""},
		{"error that is not an object",
			`data: {"error":"quota"}` + "\n\n",
			usage.Tokens{}, false, false, "error", `gemini error: "quota"`},
		{"a finish after an error leaves the finish reason error",
			`data: {"error":{"code":500,"message":"boom","status":"INTERNAL"}}` + "\n\n" + "data: {" + fin + `"STOP"}]}` + "\n\n",
			usage.Tokens{}, false, false, "error", "gemini error 500 INTERNAL: boom"},
		{"error after final usage keeps the usage",
			"data: {" + fin + `"STOP"}],"usageMetadata":{"promptTokenCount":1}}` + "\n\n" + `data: {"error":{"message":"late"}}` + "\n\n",
			usage.Tokens{PromptTokens: 1}, true, true, "error", "gemini error: late"},
		{"an array of responses in one frame",
			"data: [{\"usageMetadata\":{\"promptTokenCount\":3}},{" + fin + `"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2}}]` + "\n\n",
			usage.Tokens{PromptTokens: 3, CompletionTokens: 2}, true, true, "stop", ""},
		{"garbage and [DONE] are ignored",
			"data: not json\n\ndata: [DONE]\n\n: keep-alive\n\nevent: ping\ndata: {\"usageMetadata\":\"wrong type\",\"modelVersion\":\"m\"}\n\n",
			usage.Tokens{}, false, false, "", ""},
	}
	for _, bad := range []string{`1.5`, `"abc"`, `"1.5"`, `-3`, `"-3"`, `" 4"`, `9223372036854775808`, `1e19`, `true`, `{}`, `[1]`} {
		tt := tests[0]
		tt.name = "unreadable count " + bad + " is no report: the last one stands, not final"
		tt.stream = "data: {\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":1}}\n\n" +
			"data: {" + fin + `"STOP"}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":` + bad + `}}` + "\n\n"
		tt.want, tt.reported, tt.final, tt.finish, tt.err = usage.Tokens{PromptTokens: 4, CompletionTokens: 1}, true, false, "stop", ""
		tests = append(tests, tt)
	}
	for _, field := range []string{"promptTokenCount", "cachedContentTokenCount", "toolUsePromptTokenCount", "thoughtsTokenCount"} {
		tt := tests[0]
		tt.name = "unreadable " + field + " is no report: the last one stands, not final"
		tt.stream = "data: {\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":1,\"thoughtsTokenCount\":2}}\n\n" +
			"data: {" + fin + `"STOP"}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":1,"thoughtsTokenCount":2,"` + field + `":"abc"}}` + "\n\n"
		tt.want, tt.reported, tt.final, tt.finish, tt.err = usage.Tokens{PromptTokens: 4, CompletionTokens: 3, ReasoningTokens: 2}, true, false, "stop", ""
		tests = append(tests, tt)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tapStream(t, []byte(tt.stream))
			if r.Usage != tt.want || r.Reported != tt.reported || r.Final != tt.final || r.FinishReason != tt.finish || r.Error != tt.err {
				t.Errorf("got %+v reported %v final %v finish %q error %q\nwant %+v reported %v final %v finish %q error %q",
					r.Usage, r.Reported, r.Final, r.FinishReason, r.Error, tt.want, tt.reported, tt.final, tt.finish, tt.err)
			}
		})
	}
}

func TestBodyUsage(t *testing.T) {
	var r tap.Report
	array := `[{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":{"promptTokenCount":4}},
	  {"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2}}]`
	if err := BodyUsage([]byte(array), &r); err != nil || r.Usage.CompletionTokens != 2 || !r.Final || r.Output.String() != "ab" {
		t.Errorf("array: %v %+v final %v output %q", err, r.Usage, r.Final, r.Output.String())
	}
	r = tap.Report{}
	if err := BodyUsage([]byte(`{"usageMetadata":{"promptTokenCount":4}}`), &r); err != nil || !r.Final {
		t.Errorf("a whole response's usage is final: %v %v", err, r.Final)
	}
	r = tap.Report{}
	if err := BodyUsage([]byte(`{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}`), &r); err != nil || r.FinishReason != "error" || r.Error == "" {
		t.Errorf("error body: %v %q %q", err, r.FinishReason, r.Error)
	}
	for _, bad := range []string{"", "null", "42", "[]", "{", "<html>"} {
		if err := BodyUsage([]byte(bad), &tap.Report{}); err != ErrNoResponse {
			t.Errorf("BodyUsage(%q) = %v, want ErrNoResponse", bad, err)
		}
	}
}

// A stream cut before any usage report after the model streamed thought
// summaries bills them as reasoning: the estimate of the output may not
// report reasoning_tokens 0 when all the output was thoughts.
func TestShownThoughtsWithoutUsageAreBilledAsReasoning(t *testing.T) {
	r := tapStream(t, []byte(`data: {"candidates":[{"content":{"parts":[{"text":"The user wants the weather in Oslo, so I should call the weather tool first.","thought":true}]}}]}`+"\n\n"))
	u, src := r.Resolve(estimator(t), tap.Text("weather in Oslo?"))
	if src != usage.SourceEstimated || u.CompletionTokens == 0 || u.ReasoningTokens != u.CompletionTokens {
		t.Errorf("usage %+v (%s), want the thoughts estimated as reasoning, all of the completion", u, src)
	}
}

// TestFinishReason maps every documented Gemini finishReason: blocked
// output is content_filter, whichever filter blocked it.
func TestFinishReason(t *testing.T) {
	for reason, want := range map[string]string{
		"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
		"BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
		"IMAGE_SAFETY": "content_filter", "IMAGE_PROHIBITED_CONTENT": "content_filter", "IMAGE_RECITATION": "content_filter",
		"FINISH_REASON_UNSPECIFIED": "stop", "OTHER": "stop", "LANGUAGE": "stop", "MALFORMED_FUNCTION_CALL": "stop",
		"UNEXPECTED_TOOL_CALL": "stop", "SOMETHING_NEW": "stop",
	} {
		if got := finishReason(reason, false); got != want {
			t.Errorf("finishReason(%q) = %q, want %q", reason, got, want)
		}
	}
	if got := finishReason("STOP", true); got != "tool_calls" {
		t.Errorf("STOP after a function call: %q, want tool_calls", got)
	}
}

// The code execution tool's code and results reach the client like text:
// a stream cut before any usage report estimates them as output.
func TestCodeExecutionPartsAreOutput(t *testing.T) {
	r := tapStream(t, []byte(`data: {"candidates":[{"content":{"parts":[{"executableCode":{"language":"PYTHON","code":"print(6*7)"}},{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"42"}}]}}]}`+"\n\n"))
	if got := r.Output.String(); got != "print(6*7)42" {
		t.Errorf("output %q, want the code and its result", got)
	}
}

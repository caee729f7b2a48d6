package usage_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

func validEvent() usage.Event {
	return usage.Event{Version: usage.SchemaVersion, ID: "0197a3c2-1111-7222-8333-444455556666",
		Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), CustomerID: "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff",
		KeyID: "0197a3c2-9999-7888-8777-666655554444", Provider: "openai", Model: "gpt-4o-mini",
		Endpoint: "/v1/chat/completions", Status: usage.StatusOK, UsageSource: usage.SourceUpstream}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name        string
		edit        func(e *usage.Event)
		check       func(t *testing.T, e *usage.Event)
		corrections string
	}{
		{"nothing to correct", func(e *usage.Event) {
			e.Usage = usage.Tokens{PromptTokens: 10, CachedTokens: 4, CompletionTokens: 5, ReasoningTokens: 2}
		},
			func(t *testing.T, e *usage.Event) {}, ""},
		{"ids in upper case are written in lower case, not corrected", func(e *usage.Event) {
			e.ID, e.CustomerID, e.KeyID = strings.ToUpper(e.ID), strings.ToUpper(e.CustomerID), strings.ToUpper(e.KeyID)
			e.RequestID = "0197A3C2-ABCD-7EF0-8123-456789ABCDEF"
		}, func(t *testing.T, e *usage.Event) {
			want := validEvent()
			if e.ID != want.ID || e.CustomerID != want.CustomerID || e.KeyID != want.KeyID || e.RequestID != "0197a3c2-abcd-7ef0-8123-456789abcdef" {
				t.Errorf("ids %s %s %s %s, want them in lower case", e.ID, e.CustomerID, e.KeyID, e.RequestID)
			}
		}, ""},
		{"cached over prompt is billed as prompt", func(e *usage.Event) { e.Usage = usage.Tokens{PromptTokens: 10, CachedTokens: 1_000_000} },
			func(t *testing.T, e *usage.Event) {
				if e.Usage.CachedTokens != 10 || e.Usage.PromptTokens != 10 {
					t.Errorf("usage = %+v, want cached 10 of prompt 10", e.Usage)
				}
			}, "cache_over_prompt"},
		{"cached plus cache write over prompt", func(e *usage.Event) {
			e.Usage = usage.Tokens{PromptTokens: 10, CachedTokens: 6, CacheWriteTokens: 6}
		}, func(t *testing.T, e *usage.Event) {
			if e.Usage.CachedTokens != 6 || e.Usage.CacheWriteTokens != 4 {
				t.Errorf("usage = %+v, want cached 6, cache write 4", e.Usage)
			}
		}, "cache_over_prompt"},
		{"reasoning over completion", func(e *usage.Event) { e.Usage = usage.Tokens{CompletionTokens: 3, ReasoningTokens: 7} },
			func(t *testing.T, e *usage.Event) {
				if e.Usage.ReasoningTokens != 7 || e.Usage.CompletionTokens != 3 {
					t.Errorf("usage = %+v, want the figures as sent", e.Usage)
				}
			}, "reasoning_over_completion"},
		{"negative counts", func(e *usage.Event) {
			e.Usage = usage.Tokens{PromptTokens: -5, CompletionTokens: -1 << 40, WebSearchRequests: -1}
		},
			func(t *testing.T, e *usage.Event) {
				if e.Usage != (usage.Tokens{}) {
					t.Errorf("usage = %+v, want zero", e.Usage)
				}
			}, "negative_count"},
		{"counts beyond a rollup", func(e *usage.Event) { e.Usage = usage.Tokens{PromptTokens: 1 << 62, CompletionTokens: 1 << 62} },
			func(t *testing.T, e *usage.Event) {
				if e.Usage.PromptTokens != usage.MaxCount || e.Usage.CompletionTokens != usage.MaxCount {
					t.Errorf("usage = %+v, want both at MaxCount", e.Usage)
				}
			}, "count_over_max"},
		{"NUL in the model and the served model", func(e *usage.Event) { e.Model, e.ServedModel = "sim/x\x00y", "x\x00" },
			func(t *testing.T, e *usage.Event) {
				if e.Model != "sim/x\uFFFDy" || e.ServedModel != "x\uFFFD" {
					t.Errorf("model %q served %q", e.Model, e.ServedModel)
				}
			}, "model_cleaned,served_model_cleaned"},
		{"invalid UTF-8 in an upstream error", func(e *usage.Event) { e.Error = "bad \xff\xfe bytes" },
			func(t *testing.T, e *usage.Event) {
				if e.Error != "bad \uFFFD bytes" {
					t.Errorf("error %q", e.Error)
				}
			}, "error_cleaned"},
		{"a 1.5 MiB model name", func(e *usage.Event) { e.Model = "sim/" + strings.Repeat("é", 3<<19/2) },
			func(t *testing.T, e *usage.Event) {
				if len(e.Model) > usage.MaxModelLen || !strings.HasSuffix(e.Model, "…") || !utf8.ValidString(e.Model) {
					t.Errorf("model of %d bytes, ends %q", len(e.Model), e.Model[len(e.Model)-6:])
				}
			}, "model_truncated"},
		{"negative durations and a wild status", func(e *usage.Event) { e.TTFTMillis, e.DurationMillis, e.HTTPStatus = -1, -2, 70000 },
			func(t *testing.T, e *usage.Event) {
				if e.TTFTMillis != 0 || e.DurationMillis != 0 || e.HTTPStatus != 0 {
					t.Errorf("ttft %d duration %d status %d", e.TTFTMillis, e.DurationMillis, e.HTTPStatus)
				}
			}, "negative_duration,http_status_out_of_range"},
		{"an attempt past MaxAttempt is clamped to it", func(e *usage.Event) { e.Attempt = usage.MaxAttempt + 1 },
			func(t *testing.T, e *usage.Event) {
				if e.Attempt != usage.MaxAttempt {
					t.Errorf("attempt %d, want %d", e.Attempt, usage.MaxAttempt)
				}
			}, "attempt_out_of_range"},
		{"a negative attempt is raised to 0", func(e *usage.Event) { e.Attempt = -1 },
			func(t *testing.T, e *usage.Event) {
				if e.Attempt != 0 {
					t.Errorf("attempt %d, want 0", e.Attempt)
				}
			}, "attempt_out_of_range"},
		{"end user and tags within their limits", func(e *usage.Event) {
			e.EndUser, e.Metadata = "user-42", map[string]string{"team": "search", "": ""}
		}, func(t *testing.T, e *usage.Event) {
			if e.EndUser != "user-42" || len(e.Metadata) != 2 || e.Metadata["team"] != "search" {
				t.Errorf("end user %q metadata %v", e.EndUser, e.Metadata)
			}
		}, ""},
		{"a NUL and an overlong end user", func(e *usage.Event) { e.EndUser = "u\x00" + strings.Repeat("x", 300) },
			func(t *testing.T, e *usage.Event) {
				if len(e.EndUser) > usage.MaxEndUserLen || !strings.HasPrefix(e.EndUser, "u\uFFFD") {
					t.Errorf("end user %q", e.EndUser)
				}
			}, "end_user_cleaned,end_user_truncated"},
		{"too many tags, long and dirty ones", func(e *usage.Event) {
			e.Metadata = map[string]string{}
			for i := range 20 {
				e.Metadata[fmt.Sprintf("k%02d", i)] = "v"
			}
			e.Metadata["k00"] = strings.Repeat("v", 600)
			e.Metadata["k01"] = "a\xffb"
		}, func(t *testing.T, e *usage.Event) {
			if len(e.Metadata) != usage.MaxMetadataPairs || e.Metadata["k15"] != "v" || e.Metadata["k16"] != "" {
				t.Errorf("kept %d pairs: %v", len(e.Metadata), e.Metadata)
			}
			if v := e.Metadata["k00"]; len(v) > usage.MaxMetadataValueLen || e.Metadata["k01"] != "a\uFFFDb" {
				t.Errorf("k00 of %d bytes, k01 %q", len(v), e.Metadata["k01"])
			}
		}, "metadata_cleaned,metadata_truncated"},
		{"two keys the same once cut", func(e *usage.Event) {
			long := strings.Repeat("k", 100)
			e.Metadata = map[string]string{long + "a": "1", long + "b": "2"}
		}, func(t *testing.T, e *usage.Event) {
			if len(e.Metadata) != 1 {
				t.Errorf("metadata %v, want the first key only", e.Metadata)
			}
		}, "metadata_truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := validEvent()
			tt.edit(&e)
			changed := e.Normalize()
			if changed != (tt.corrections != "") || e.Corrections != tt.corrections {
				t.Errorf("Normalize() = %v, corrections %q; want %q", changed, e.Corrections, tt.corrections)
			}
			tt.check(t, &e)
			if err := e.Validate(); err != nil {
				t.Errorf("Validate after Normalize: %v", err)
			}
			before := e
			if e.Normalize() || !reflect.DeepEqual(e, before) {
				t.Errorf("a second Normalize changed %+v into %+v", before, e)
			}
		})
	}
}

func TestValidateRefusesWhatNormalizeDoesNotFix(t *testing.T) {
	for name, edit := range map[string]func(e *usage.Event){
		"version":       func(e *usage.Event) { e.Version = 2 },
		"id":            func(e *usage.Event) { e.ID = "not-a-uuid" },
		"braced id":     func(e *usage.Event) { e.ID = "{" + e.ID[:34] + "}" },
		"customer":      func(e *usage.Event) { e.CustomerID = "" },
		"key":           func(e *usage.Event) { e.KeyID = "x" },
		"time":          func(e *usage.Event) { e.Time = time.Time{} },
		"model":         func(e *usage.Event) { e.Model = "" },
		"status":        func(e *usage.Event) { e.Status = "weird" },
		"source":        func(e *usage.Event) { e.UsageSource = "" },
		"NUL in model":  func(e *usage.Event) { e.Model = "a\x00" },
		"cached>prompt": func(e *usage.Event) { e.Usage.CachedTokens = 1 },
		"cached+write>prompt": func(e *usage.Event) {
			e.Usage = usage.Tokens{PromptTokens: 10, CachedTokens: 6, CacheWriteTokens: 6}
		},
		"negative":      func(e *usage.Event) { e.Usage.CompletionTokens = -1 },
		"NUL in a tag":  func(e *usage.Event) { e.Metadata = map[string]string{"a": "\x00"} },
		"long end user": func(e *usage.Event) { e.EndUser = strings.Repeat("u", usage.MaxEndUserLen+1) },
		"year 9999 in UTC": func(e *usage.Event) {
			e.Time = time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("EST", -5*3600)).Add(-24 * time.Hour * 365)
		},
		"year 1999":        func(e *usage.Event) { e.Time = time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC) },
		"request id":       func(e *usage.Event) { e.RequestID = "req-1" },
		"negative ttft":    func(e *usage.Event) { e.TTFTMillis = -1 },
		"negative run":     func(e *usage.Event) { e.DurationMillis = -1 },
		"over MaxCount":    func(e *usage.Event) { e.Usage.CompletionTokens = usage.MaxCount + 1 },
		"attempt over":     func(e *usage.Event) { e.Attempt = usage.MaxAttempt + 1 },
		"http_status 1000": func(e *usage.Event) { e.HTTPStatus = 1000 },
	} {
		e := validEvent()
		edit(&e)
		if err := e.Validate(); !errors.Is(err, usage.ErrInvalidEvent) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidEvent", name, err)
		}
	}
	for name, edit := range map[string]func(e *usage.Event){
		"as is":          func(e *usage.Event) {},
		"year 2000":      func(e *usage.Event) { e.Time = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"year 9998":      func(e *usage.Event) { e.Time = time.Date(9998, 12, 31, 23, 59, 59, 0, time.UTC) },
		"at every bound": func(e *usage.Event) { e.Attempt, e.HTTPStatus = usage.MaxAttempt, 999 },
	} {
		e := validEvent()
		edit(&e)
		if err := e.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v, want nil", name, err)
		}
	}
}

// FuzzNormalize drives arbitrary strings and counts through Normalize:
// whatever they are, the result validates, fits its limits, and a second
// Normalize changes nothing.
func FuzzNormalize(f *testing.F) {
	f.Add("sim/x\x00y", "\xff", "err\x00", "stop", int64(10), int64(1_000_000), int64(-3), int64(5), int64(9), 200)
	f.Add(strings.Repeat("é", 200), "", strings.Repeat("\xff", 2000), "", int64(1<<62), int64(1<<62), int64(1<<62), int64(-1<<62), int64(1<<62), -7)
	f.Fuzz(func(t *testing.T, model, served, errText, finish string, prompt, cached, write, completion, reasoning int64, status int) {
		e := validEvent()
		// The strings serve as the end user and tags too.
		e.EndUser = errText + finish
		e.Metadata = map[string]string{model: served, served: errText, finish: model}
		if model == "" {
			model = "m"
		}
		e.Model, e.ServedModel, e.Error, e.FinishReason, e.HTTPStatus = model, served, errText, finish, status
		e.Usage = usage.Tokens{PromptTokens: prompt, CachedTokens: cached, CacheWriteTokens: write,
			CompletionTokens: completion, ReasoningTokens: reasoning}
		e.Normalize()
		if err := e.Validate(); err != nil {
			t.Fatalf("Validate after Normalize: %v (%+v)", err, e)
		}
		before := e
		if e.Normalize() || !reflect.DeepEqual(e, before) {
			t.Fatalf("not idempotent: %+v then %+v", before, e)
		}
	})
}

// TestNormalizeClampsAtMaxCount: the bound is MaxCount itself, not some
// larger figure: a count at it is kept, one a token above it is lowered
// to it and flagged.
func TestNormalizeClampsAtMaxCount(t *testing.T) {
	e := validEvent()
	e.Usage = usage.Tokens{PromptTokens: usage.MaxCount, CompletionTokens: usage.MaxCount + 1}
	if !e.Normalize() || e.Usage.PromptTokens != usage.MaxCount || e.Usage.CompletionTokens != usage.MaxCount ||
		e.Corrections != usage.CorrectionOverMax {
		t.Fatalf("usage %+v, corrections %q; want both at %d, %q", e.Usage, e.Corrections, usage.MaxCount, usage.CorrectionOverMax)
	}
}

// TestNormalizeBoundsAreExact: each of Normalize's other bounds is the
// figure its doc states, not one beside it: reasoning_tokens one above
// completion_tokens is flagged (one equal is not), an http_status of 1000
// is set to 0 (999 is kept), and an attempt one above MaxAttempt is
// clamped (MaxAttempt is kept).
func TestNormalizeBoundsAreExact(t *testing.T) {
	tests := []struct {
		name        string
		edit        func(e *usage.Event)
		corrections string
	}{
		{"reasoning equal to completion", func(e *usage.Event) { e.Usage = usage.Tokens{CompletionTokens: 5, ReasoningTokens: 5} }, ""},
		{"reasoning a token over completion", func(e *usage.Event) { e.Usage = usage.Tokens{CompletionTokens: 5, ReasoningTokens: 6} },
			usage.CorrectionReasoningOverCompletion},
		{"http_status 999", func(e *usage.Event) { e.HTTPStatus = 999 }, ""},
		{"http_status 1000", func(e *usage.Event) { e.HTTPStatus = 1000 }, usage.CorrectionHTTPStatus},
		{"attempt at MaxAttempt", func(e *usage.Event) { e.Attempt = usage.MaxAttempt }, ""},
		{"attempt over MaxAttempt", func(e *usage.Event) { e.Attempt = usage.MaxAttempt + 1 }, usage.CorrectionAttempt},
	}
	for _, tt := range tests {
		e := validEvent()
		tt.edit(&e)
		before := e
		changed := e.Normalize()
		if e.Corrections != tt.corrections || changed != (tt.corrections != "") {
			t.Errorf("%s: corrections %q (changed %v), want %q", tt.name, e.Corrections, changed, tt.corrections)
		}
		if tt.corrections == "" && !reflect.DeepEqual(e, before) {
			t.Errorf("%s: changed to %+v", tt.name, e)
		}
	}
	e := validEvent()
	e.HTTPStatus, e.Attempt = 1000, usage.MaxAttempt+1
	e.Normalize()
	if e.HTTPStatus != 0 || e.Attempt != usage.MaxAttempt {
		t.Errorf("http_status %d, attempt %d; want 0 and %d", e.HTTPStatus, e.Attempt, usage.MaxAttempt)
	}
}

// TestNotAheadOfBoundIsMaxTimeAhead: an event dated exactly MaxTimeAhead
// past its receipt keeps its time; a millisecond more and it is dated at
// its receipt, corrected.
func TestNotAheadOfBoundIsMaxTimeAhead(t *testing.T) {
	received := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := validEvent()
	e.Time = received.Add(usage.MaxTimeAhead)
	if e.NotAheadOf(received) || !e.Time.Equal(received.Add(usage.MaxTimeAhead)) || e.Corrections != "" {
		t.Errorf("dated MaxTimeAhead ahead: time %s, corrections %q; want kept", e.Time, e.Corrections)
	}
	e.Time = received.Add(usage.MaxTimeAhead + time.Millisecond)
	if !e.NotAheadOf(received) || !e.Time.Equal(received) || e.Corrections != usage.CorrectionTimeAhead {
		t.Errorf("dated a millisecond more: time %s, corrections %q; want %s, %q", e.Time, e.Corrections, received, usage.CorrectionTimeAhead)
	}
}

// TestValidateTakesEverySource: every usage_source the gateway writes
// validates (a partial one too: a stream cut short after a usage report),
// and is not dead-lettered as unknown.
func TestValidateTakesEverySource(t *testing.T) {
	for _, src := range []usage.Source{usage.SourceUpstream, usage.SourcePartial, usage.SourceEstimated} {
		e := validEvent()
		e.UsageSource = src
		if err := e.Validate(); err != nil {
			t.Errorf("usage_source %q: %v", src, err)
		}
	}
}

// TestTotalCountsReasoningOnce: reasoning_tokens are a subset of
// completion_tokens (OpenAI's convention, the ledger's), so the total a
// tpm_limit counts and total_tokens shows is prompt + completion, the
// reasoning not added again.
func TestTotalCountsReasoningOnce(t *testing.T) {
	u := usage.Tokens{PromptTokens: 10, CachedTokens: 4, CompletionTokens: 7, ReasoningTokens: 5}
	if got := u.Total(); got != 17 {
		t.Fatalf("Total() = %d, want 17 (prompt 10 + completion 7, reasoning inside it)", got)
	}
}

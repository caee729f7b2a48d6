package usage

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxCount is the largest token (or request) count one event may carry:
// one billion. No model reads or writes that many tokens in one request (the
// largest context windows hold a few million), and a rollup row, a 64-bit
// sum, would need over nine billion such events in one hour for one key and
// model to overflow.
const MaxCount = 1_000_000_000

// Limits on an event's strings, in bytes. A longer string is truncated (at
// a character boundary, ending in "…") by Normalize.
const (
	MaxProviderLen     = 128
	MaxModelLen        = 256
	MaxEndpointLen     = 256
	MaxFinishReasonLen = 64
	MaxErrorLen        = 1024
	MaxCorrectionsLen  = 512
	MaxEndUserLen      = 256
	MaxDeploymentLen   = 256
	MaxRequestIDLen    = 36 // a UUID's text
)

// MaxAttempt is the highest Event.Attempt stored; Normalize clamps a
// higher one (and a negative one to 0), flagging CorrectionAttempt.
const MaxAttempt = 1000

// Limits on an event's metadata: pairs, and bytes per key and per value
// (OpenAI's bounds on its metadata field: 16 pairs, keys of 64 and
// values of 512 characters; https://platform.openai.com/docs/api-reference/chat/create#chat-create-metadata).
const (
	MaxMetadataPairs    = 16
	MaxMetadataKeyLen   = 64
	MaxMetadataValueLen = 512
)

// Correction codes, recorded in Event.Corrections by Normalize. String
// fields add "<field>_cleaned" (invalid UTF-8 or NUL replaced by U+FFFD) and
// "<field>_truncated".
const (
	// CorrectionNegative: a negative count was raised to 0.
	CorrectionNegative = "negative_count"
	// CorrectionOverMax: a count above MaxCount was lowered to it.
	CorrectionOverMax = "count_over_max"
	// CorrectionCacheOverPrompt: cached_tokens + cache_write_tokens exceeded
	// prompt_tokens; the cache figures were lowered to fit (cached first).
	CorrectionCacheOverPrompt = "cache_over_prompt"
	// CorrectionReasoningOverCompletion: reasoning_tokens exceeded
	// completion_tokens. Both are kept as the provider sent them (OpenRouter
	// does send this on an error frame, and its figures are the record),
	// and the ledger rates reasoning_tokens as at most completion_tokens.
	CorrectionReasoningOverCompletion = "reasoning_over_completion"
	// CorrectionReasoningOutsideCompletion: the provider counted its
	// reasoning tokens apart from completion_tokens (its total_tokens is
	// prompt + completion + reasoning: xAI's Grok), and the gateway added
	// them to completion_tokens, which by OpenAI's convention, the
	// ledger's, includes them. Set by the gateway, not by Normalize.
	CorrectionReasoningOutsideCompletion = "reasoning_outside_completion"
	// CorrectionNegativeDuration: a negative ttft_ms or duration_ms was raised to 0.
	CorrectionNegativeDuration = "negative_duration"
	// CorrectionHTTPStatus: an http_status outside [0, 999] was set to 0.
	CorrectionHTTPStatus = "http_status_out_of_range"
	// CorrectionAttempt: an attempt number outside [0, MaxAttempt] was clamped.
	CorrectionAttempt = "attempt_out_of_range"
	// CorrectionTimeAhead: the event's time was more than MaxTimeAhead past
	// the time JetStream stored it (a gateway's clock running ahead), and
	// was set to that time by the meter (Event.NotAheadOf).
	CorrectionTimeAhead = "time_ahead_of_receipt"
)

// MaxTimeAhead is how far past its receipt an event's time may be: the
// ledger's bound for entries' effective_at (5 minutes), for clocks that
// run a little ahead.
const MaxTimeAhead = 5 * time.Minute

// LateAfter is how long after the end of the UTC month a row (an event,
// an entry) is dated in it may be recorded before it counts as late: it
// then moved a month already over, whose statement may have been issued
// (the meter logs and counts such an event; reconciliation counts them).
// An hour is longer than a request begun before midnight runs (a stream,
// its retries, the drain after its client left), so that what counts is a
// delivery after the month: a spool drained late, a dead letter replayed,
// a crashed request recovered at a later start, a gateway whose clock is
// behind, a payment dated back.
const LateAfter = time.Hour

// Late reports whether a row dated at was recorded (received) more than
// LateAfter after the end of at's UTC month.
func Late(at, recorded time.Time) bool {
	t := at.UTC()
	end := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 1, 0)
	return recorded.After(end.Add(LateAfter))
}

// NotAheadOf sets e's time to received, the time the usage stream stored
// it, when it is more than MaxTimeAhead past it, recording
// CorrectionTimeAhead, and reports whether it did. A gateway whose clock
// ran ahead (by hours, or years) dated its events so: charged to the
// balance, and so to the customer's budget, at once, they appeared on no
// statement until their month came.
func (e *Event) NotAheadOf(received time.Time) bool {
	if received.IsZero() || !e.Time.After(received.Add(MaxTimeAhead)) {
		return false
	}
	e.Time = received
	if !HasCorrection(e.Corrections, CorrectionTimeAhead) {
		if e.Corrections != "" {
			e.Corrections += ","
		}
		e.Corrections, _, _ = Clean(e.Corrections+CorrectionTimeAhead, MaxCorrectionsLen)
	}
	return true
}

// Normalize brings e within the ranges Validate checks, and records each
// correction in e.Corrections. It reports whether it changed anything.
//
//   - Every count is clamped into [0, MaxCount]; then cached_tokens +
//     cache_write_tokens ≤ prompt_tokens (the cache figures are lowered,
//     never the total raised: a provider's total is what it bills).
//   - reasoning_tokens above completion_tokens is flagged but kept as the
//     provider sent it; rating counts it as at most completion_tokens.
//   - Every string is made valid UTF-8 without NUL (each invalid sequence
//     or NUL becomes U+FFFD) and cut to its limit.
//   - Metadata is cleaned the same way, key by key and value by value
//     ("metadata_cleaned", "metadata_truncated"), and only the first
//     MaxMetadataPairs keys in byte order are kept ("metadata_truncated").
//
// It does not change ids, time, version, status or usage source: those
// come from the gateway, and Validate refuses them when malformed. A UUID
// (id, customer_id, key_id, request_id) in upper case is written in lower
// case, its canonical text form, as Postgres writes it: the same id, so
// not a correction, and the one spelling maps keyed by it (the customer's
// overrides, its worker lane) find.
func (e *Event) Normalize() bool {
	for _, id := range []*string{&e.ID, &e.CustomerID, &e.KeyID, &e.RequestID} {
		*id = strings.ToLower(*id) // no copy when it has no upper case
	}
	origCorrections := e.Corrections
	var fixes []string
	fix := func(code string) {
		for _, f := range fixes {
			if f == code {
				return
			}
		}
		fixes = append(fixes, code)
	}
	u := &e.Usage
	for _, c := range []*int64{&u.PromptTokens, &u.CachedTokens, &u.CacheWriteTokens, &u.CompletionTokens, &u.ReasoningTokens, &u.WebSearchRequests} {
		switch {
		case *c < 0:
			*c = 0
			fix(CorrectionNegative)
		case *c > MaxCount:
			*c = MaxCount
			fix(CorrectionOverMax)
		}
	}
	if u.CachedTokens+u.CacheWriteTokens > u.PromptTokens {
		u.CachedTokens = min(u.CachedTokens, u.PromptTokens)
		u.CacheWriteTokens = min(u.CacheWriteTokens, u.PromptTokens-u.CachedTokens)
		fix(CorrectionCacheOverPrompt)
	}
	if u.ReasoningTokens > u.CompletionTokens {
		fix(CorrectionReasoningOverCompletion) // flagged, kept as sent
	}
	if e.TTFTMillis < 0 || e.DurationMillis < 0 {
		e.TTFTMillis, e.DurationMillis = max(e.TTFTMillis, 0), max(e.DurationMillis, 0)
		fix(CorrectionNegativeDuration)
	}
	if e.Attempt < 0 || e.Attempt > MaxAttempt {
		e.Attempt = min(max(e.Attempt, 0), MaxAttempt)
		fix(CorrectionAttempt)
	}
	if e.HTTPStatus < 0 || e.HTTPStatus > 999 {
		e.HTTPStatus = 0
		fix(CorrectionHTTPStatus)
	}
	for i, v := range e.stringFields() {
		f := stringLimits[i]
		if f.name == "corrections" {
			continue // rewritten below
		}
		s, cleaned, cut := Clean(*v, f.max)
		*v = s
		if cleaned {
			fix(f.name + "_cleaned")
		}
		if cut {
			fix(f.name + "_truncated")
		}
	}
	if m, cleaned, cut := cleanMetadata(e.Metadata); cleaned || cut {
		e.Metadata = m
		if cleaned {
			fix("metadata_cleaned")
		}
		if cut {
			fix("metadata_truncated")
		}
	}
	all := e.Corrections
	for _, f := range fixes {
		if !HasCorrection(all, f) {
			if all != "" {
				all += ","
			}
			all += f
		}
	}
	e.Corrections, _, _ = Clean(all, MaxCorrectionsLen)
	// Every change of a value records a fix; the reasoning flag changes
	// nothing but the corrections, unless they had it already.
	changed := e.Corrections != origCorrections
	for _, f := range fixes {
		if f != CorrectionReasoningOverCompletion {
			changed = true
		}
	}
	return changed
}

// HasCorrection reports whether list, an event's Corrections (codes
// separated by commas), holds code.
func HasCorrection(list, code string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == code {
			return true
		}
	}
	return false
}

// WithoutCorrection returns list, an event's Corrections, without code.
func WithoutCorrection(list, code string) string {
	var kept []string
	for c := range strings.SplitSeq(list, ",") {
		if c != code && c != "" {
			kept = append(kept, c)
		}
	}
	return strings.Join(kept, ",")
}

// stringLimits names an event's strings, in the order of stringFields,
// with their limits.
var stringLimits = [...]struct {
	name string
	max  int
}{
	{"provider", MaxProviderLen},
	{"model", MaxModelLen},
	{"served_model", MaxModelLen},
	{"endpoint", MaxEndpointLen},
	{"finish_reason", MaxFinishReasonLen},
	{"error", MaxErrorLen},
	{"corrections", MaxCorrectionsLen},
	{"end_user", MaxEndUserLen},
	{"deployment", MaxDeploymentLen},
	{"request_id", MaxRequestIDLen},
}

// stringFields points at an event's strings, in the order of stringLimits.
func (e *Event) stringFields() [len(stringLimits)]*string {
	return [...]*string{&e.Provider, &e.Model, &e.ServedModel, &e.Endpoint, &e.FinishReason, &e.Error, &e.Corrections, &e.EndUser, &e.Deployment, &e.RequestID}
}

// ellipsis ends a truncated string.
const ellipsis = "…"

// Clean returns s as valid UTF-8 without NUL bytes (each invalid byte
// sequence and each NUL replaced by U+FFFD), cut to at most max bytes at a
// character boundary and then ending in "…". It reports whether it
// replaced anything and whether it cut. max must be at least 4.
func Clean(s string, max int) (out string, cleaned, cut bool) {
	if CheckString(s, max) == nil {
		return s, false, false
	}
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
		cleaned = true
	}
	if len(s) > max {
		end := max - len(ellipsis)
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		s, cut = s[:end]+ellipsis, true
	}
	return s, cleaned, cut
}

// CheckString returns an error unless s is valid UTF-8, holds no NUL and is
// at most max bytes long: what Postgres' text type and an event's limits
// take.
func CheckString(s string, max int) error { return checkString(s, max) }

func checkString(s string, max int) error {
	switch {
	case len(s) > max:
		return fmt.Errorf("is longer than %d bytes", max)
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("contains a NUL byte")
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	}
	return nil
}

// isUUID reports whether s is a UUID in its canonical text form:
// 8-4-4-4-12 hexadecimal digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// cleanMetadata returns m within the metadata limits: each key and value
// cleaned and cut as Clean does (a key made equal to another by its cut
// is dropped), and only the first MaxMetadataPairs keys in byte order.
// It returns m itself when it is within them.
func cleanMetadata(m map[string]string) (out map[string]string, cleaned, cut bool) {
	if checkMetadata(m) == nil {
		return m, false, false
	}
	keys := slices.Sorted(maps.Keys(m))
	out = make(map[string]string, min(len(keys), MaxMetadataPairs))
	for _, k := range keys {
		if len(out) == MaxMetadataPairs {
			cut = true
			break
		}
		ck, kc, kt := Clean(k, MaxMetadataKeyLen)
		v, vc, vt := Clean(m[k], MaxMetadataValueLen)
		cleaned, cut = cleaned || kc || vc, cut || kt || vt
		if _, dup := out[ck]; dup {
			cut = true
			continue
		}
		out[ck] = v
	}
	return out, cleaned, cut
}

// checkMetadata returns an error unless m is within the metadata limits.
func checkMetadata(m map[string]string) error {
	if len(m) > MaxMetadataPairs {
		return fmt.Errorf("has %d pairs, more than %d", len(m), MaxMetadataPairs)
	}
	for k, v := range m {
		if err := checkString(k, MaxMetadataKeyLen); err != nil {
			return fmt.Errorf("key %q %v", clip(k), err)
		}
		if err := checkString(v, MaxMetadataValueLen); err != nil {
			return fmt.Errorf("value of %q %v", clip(k), err)
		}
	}
	return nil
}

// Package usage is the usage event: the one contract between the gateway,
// which publishes one event per upstream request, the meter, which carries
// it through JetStream, and the ledger, which stores it exactly once. It
// holds the event's schema, its normalization (clamping and cleaning, so
// that no byte a client or an upstream sends can make an event
// unstorable), its validation, its decoding, and the refusal a store
// gives for one event of a batch. It imports only the standard library.
package usage

import (
	"errors"
	"fmt"
	"time"
)

// SchemaVersion is the version of the usage event's wire format. A worker
// refuses events of any other version rather than guessing at their meaning.
// Fields added to version 1 are optional, and their absence keeps its
// meaning.
const SchemaVersion = 1

// Source says where an event's token counts came from (its usage_source).
type Source string

// Usage sources.
const (
	// SourceUpstream means every figure was reported by the provider.
	SourceUpstream Source = "upstream"
	// SourcePartial means the provider reported some figures (for example the
	// prompt, in Anthropic's message_start) and the rest were estimated.
	SourcePartial Source = "partial"
	// SourceEstimated means the provider reported nothing and the gateway
	// estimated the figures with a tokenizer.
	SourceEstimated Source = "estimated"
)

// Status is how an upstream request ended.
type Status string

// Event statuses.
const (
	// StatusOK is a request the upstream completed.
	StatusOK Status = "ok"
	// StatusUpstreamError is a request the upstream refused or failed, before
	// or during the stream.
	StatusUpstreamError Status = "upstream_error"
	// StatusClientCancelled is a request whose client went away before the end.
	StatusClientCancelled Status = "client_cancelled"
	// StatusTimeout is a request whose upstream did not answer in time.
	StatusTimeout Status = "timeout"
	// StatusCutOff is a request still streaming when the gateway shut down
	// and its grace period ran out.
	StatusCutOff Status = "cut_off"
	// StatusCrashed is a request the gateway started and never finished
	// because its process died; it is recovered from the gateway's crash
	// journal at the next start, with usage estimated from its last
	// checkpoint.
	StatusCrashed Status = "crashed"
)

// Known reports whether s is one of the Status constants.
func (s Status) Known() bool {
	switch s {
	case StatusOK, StatusUpstreamError, StatusClientCancelled, StatusTimeout, StatusCutOff, StatusCrashed:
		return true
	}
	return false
}

// Known reports whether s is one of the Source constants.
func (s Source) Known() bool {
	switch s {
	case SourceUpstream, SourcePartial, SourceEstimated:
		return true
	}
	return false
}

// Tokens is normalized token usage, in the shape of OpenAI's usage object.
// All figures are token counts, except WebSearchRequests which counts
// requests.
//
// PromptTokens counts ALL input, including cache reads and cache writes;
// CachedTokens (cache reads) and CacheWriteTokens are subsets of it.
// CompletionTokens counts ALL output, including reasoning; ReasoningTokens
// is a subset of it. Normalize enforces the range [0, MaxCount] of every
// figure and the prompt's relation; a provider's reasoning_tokens above
// its completion_tokens is kept as sent and flagged (see Normalize).
type Tokens struct {
	PromptTokens      int64 `json:"prompt_tokens"`
	CachedTokens      int64 `json:"cached_tokens"`
	CacheWriteTokens  int64 `json:"cache_write_tokens"`
	CompletionTokens  int64 `json:"completion_tokens"`
	ReasoningTokens   int64 `json:"reasoning_tokens"`
	WebSearchRequests int64 `json:"web_search_requests,omitempty"`
}

// Total is PromptTokens + CompletionTokens.
func (t Tokens) Total() int64 { return t.PromptTokens + t.CompletionTokens }

// Event is one upstream request's usage: schema version 1. The gateway
// publishes exactly one per upstream request, whatever happens to it, and the
// ledger stores it at most once, keyed by ID.
type Event struct {
	// Version is SchemaVersion.
	Version int `json:"v"`
	// ID is the request id, a UUID; it is the idempotency key of the event
	// all the way into the ledger (Nats-Msg-Id, then the ledger's unique key).
	ID string `json:"id"`
	// Time is when the gateway received the request, in UTC. It places the
	// event in its billing period and selects the price version.
	Time time.Time `json:"time"`
	// CustomerID and KeyID identify who is billed (UUIDs).
	CustomerID string `json:"customer_id"`
	KeyID      string `json:"key_id"`
	// Provider is the configured provider's name (for example "openai").
	Provider string `json:"provider"`
	// Model is the model the client asked for, as routed: a model-table name
	// (for example "gpt-4o") or "provider/model". Prices are looked up by it.
	Model string `json:"model"`
	// ServedModel is the model the upstream said it served, when it said so.
	ServedModel string `json:"served_model,omitempty"`
	// EndUser is the customer's own end user the request was made for, as
	// the client named it: the X-Tollgate-End-User header, else OpenAI's
	// safety_identifier or user field, else Anthropic's metadata.user_id.
	// At most MaxEndUserLen bytes; "" when the client named none.
	EndUser string `json:"end_user,omitempty"`
	// Metadata holds the client's tags of the request: the string values of
	// OpenAI's metadata object, then the X-Tollgate-Metadata header's (a
	// JSON object; its values win). At most MaxMetadataPairs pairs, keys of
	// at most MaxMetadataKeyLen bytes and values of at most
	// MaxMetadataValueLen, OpenAI's own bounds on metadata; nil when none.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Endpoint is the gateway path the client called, e.g. "/v1/chat/completions".
	Endpoint string `json:"endpoint"`
	// Stream is true when the response was streamed (SSE).
	Stream bool `json:"stream"`
	// Status is how the request ended.
	Status Status `json:"status"`
	// HTTPStatus is the status code the gateway sent the client (0 if none was sent).
	HTTPStatus int `json:"http_status"`
	// FinishReason is the upstream's finish reason in OpenAI's terms
	// ("stop", "length", "tool_calls", "content_filter"), when one arrived.
	FinishReason string `json:"finish_reason,omitempty"`
	// Usage holds the normalized token counts.
	Usage Tokens `json:"usage"`
	// UsageSource says where Usage came from.
	UsageSource Source `json:"usage_source"`
	// TTFTMillis is the time from receiving the request to the first content
	// byte sent to the client, in milliseconds, rounded up to at least 1 (0
	// if none was sent).
	TTFTMillis int64 `json:"ttft_ms"`
	// DurationMillis is the time from receiving the request to the end of the
	// response, in milliseconds; the gateway records at least TTFTMillis.
	DurationMillis int64 `json:"duration_ms"`
	// Error is a short description of what went wrong, for failed requests.
	Error string `json:"error,omitempty"`
	// Corrections lists what Normalize changed, one code each (see the
	// Correction constants), comma-separated; empty when nothing was.
	Corrections string `json:"corrections,omitempty"`
	// Deployment names the model deployment the attempt went to (the
	// config's models[].deployments[].name, by default
	// "provider/upstream_model"); "" in events of gateways before
	// deployments, which had one deployment per model.
	Deployment string `json:"deployment,omitempty"`
	// Attempt numbers the upstream attempts of one client request from 1;
	// 0 (absent) means 1, a request tried once.
	Attempt int `json:"attempt,omitempty"`
	// RequestID is the client request (its X-Request-Id) an attempt served
	// or failed for, set on attempts whose ID differs from it: an attempt
	// that failed and was retried gets an id of its own.
	RequestID string `json:"request_id,omitempty"`
	// NotCharged marks an attempt the customer is not charged for: it
	// failed before the client got a byte and the request was retried on
	// another deployment. Its usage (tokens the upstream may bill, such as a
	// stream that died after producing some) is the operator's cost, kept
	// to reconcile the provider's invoice. false (absent) is an attempt the
	// customer is charged for, as every event was before retries.
	NotCharged bool `json:"not_charged,omitempty"`
}

// ErrInvalidEvent is wrapped by Validate's errors.
var ErrInvalidEvent = errors.New("invalid usage event")

// Validate reports whether e can be stored: its schema version, its ids
// (UUIDs), its time, its model, status and usage source, and the ranges
// Normalize enforces. It returns an error wrapping ErrInvalidEvent that
// names the first field at fault. An event that Normalize has corrected
// fails only for a missing or malformed id, time, model, status or source:
// faults of the gateway, not of what a client or an upstream sent.
func (e *Event) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidEvent, fmt.Sprintf(format, args...))
	}
	switch {
	case e.Version != SchemaVersion:
		return bad("schema version %d, want %d", e.Version, SchemaVersion)
	case !isUUID(e.ID):
		return bad("id %q is not a UUID", clip(e.ID))
	case e.Time.IsZero():
		return bad("time is zero")
	case e.Time.UTC().Year() < 2000 || e.Time.UTC().Year() > 9998:
		// In UTC, as it is stored: "9999-12-31T23:00:00-05:00" is in
		// 10000, which encoding/json cannot write back. And the ledger's
		// lists end where its API's times do, at 9999 (ledger.checkTime):
		// an event of 9999 would be charged and listed nowhere.
		return bad("time %s is out of range (years 2000-9998 UTC)", e.Time.Format(time.RFC3339))
	case !isUUID(e.CustomerID):
		return bad("customer_id %q is not a UUID", clip(e.CustomerID))
	case !isUUID(e.KeyID):
		return bad("key_id %q is not a UUID", clip(e.KeyID))
	case e.Model == "":
		return bad("model is empty")
	case !e.Status.Known():
		return bad("status %q is unknown", clip(string(e.Status)))
	case !e.UsageSource.Known():
		return bad("usage_source %q is unknown", clip(string(e.UsageSource)))
	}
	for i, v := range e.stringFields() {
		if f := stringLimits[i]; checkString(*v, f.max) != nil {
			return bad("%s: %v", f.name, checkString(*v, f.max))
		}
	}
	if err := checkMetadata(e.Metadata); err != nil {
		return bad("metadata: %v", err)
	}
	u := e.Usage
	for _, c := range []int64{u.PromptTokens, u.CachedTokens, u.CacheWriteTokens, u.CompletionTokens, u.ReasoningTokens, u.WebSearchRequests} {
		if c < 0 || c > MaxCount {
			return bad("a token count is outside [0, %d]", int64(MaxCount))
		}
	}
	switch {
	case u.CachedTokens+u.CacheWriteTokens > u.PromptTokens:
		return bad("cached_tokens + cache_write_tokens exceed prompt_tokens")
	case e.RequestID != "" && !isUUID(e.RequestID):
		return bad("request_id %q is not a UUID", clip(e.RequestID))
	case e.Attempt < 0 || e.Attempt > MaxAttempt:
		return bad("attempt %d is outside [0, %d]", e.Attempt, MaxAttempt)
	case e.HTTPStatus < 0 || e.HTTPStatus > 999:
		return bad("http_status %d is out of range", e.HTTPStatus)
	case e.TTFTMillis < 0 || e.DurationMillis < 0:
		return bad("a duration is negative")
	}
	return nil
}

// ErrBatchRefused is wrapped by a store's error when a batch holds data the
// store cannot take (for Postgres, a data exception or an integrity
// violation) and it cannot tell which event: no retry of the same batch can
// succeed. The meter worker then writes the batch in halves, down to the
// single events refused, which it sets aside in the dead-letter stream.
// Any other error of a store is taken as transient and retried.
var ErrBatchRefused = errors.New("the store refused the batch's data")

// RefusedError is a store's refusal of one event of a batch for a reason
// no retry can fix (its cost overflows, say). The meter worker sets that
// event aside in the dead-letter stream, with Reason, and writes the rest.
type RefusedError struct {
	// ID is the refused event's id.
	ID string
	// Reason says why, in words fit for an operator.
	Reason string
}

// Error names the refused event and why.
func (e *RefusedError) Error() string { return "event " + e.ID + " refused: " + e.Reason }

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// DeadLetter is a usage event set aside by the meter (a message of its
// dead-letter stream), with why.
type DeadLetter struct {
	// Seq is its sequence in the dead-letter stream: what replay takes.
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
	// EventID is the message's Nats-Msg-Id (the event id, when it had one).
	EventID string `json:"event_id,omitempty"`
	Data    string `json:"data"`
}

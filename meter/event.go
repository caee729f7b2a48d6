// Package meter carries usage from the gateway to the ledger: the usage event
// (the one type every part of Tollgate shares), the JetStream publisher that
// the gateway calls once per upstream request, and the worker that writes
// events into a Store exactly once.
package meter

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// SchemaVersion is the version of the usage event's wire format. A worker
// refuses events of any other version rather than guessing at their meaning.
const SchemaVersion = 1

// Usage sources, as recorded in Event.UsageSource.
const (
	// SourceUpstream means every figure was reported by the provider.
	SourceUpstream = "upstream"
	// SourcePartial means the provider reported some figures (for example the
	// prompt, in Anthropic's message_start) and the rest were estimated.
	SourcePartial = "partial"
	// SourceEstimated means the provider reported nothing and the gateway
	// estimated the figures with a tokenizer.
	SourceEstimated = "estimated"
)

// Event statuses, as recorded in Event.Status.
const (
	// StatusOK is a request the upstream completed.
	StatusOK = "ok"
	// StatusUpstreamError is a request the upstream refused or failed, before
	// or during the stream.
	StatusUpstreamError = "upstream_error"
	// StatusClientCancelled is a request whose client went away before the end.
	StatusClientCancelled = "client_cancelled"
	// StatusTimeout is a request whose upstream did not answer in time.
	StatusTimeout = "timeout"
	// StatusCutOff is a request still streaming when the gateway shut down
	// and its grace period ran out.
	StatusCutOff = "cut_off"
)

// Usage is normalized token usage, in the shape of OpenAI's usage object.
// All figures are token counts, except WebSearchRequests which counts requests.
//
// PromptTokens counts ALL input, including cache reads and cache writes;
// CachedTokens (cache reads) and CacheWriteTokens are subsets of it.
// CompletionTokens counts ALL output, including reasoning; ReasoningTokens is a
// subset of it. Figures are recorded as the provider sent them, even when a
// provider's subset exceeds its total.
type Usage struct {
	PromptTokens      int64 `json:"prompt_tokens"`
	CachedTokens      int64 `json:"cached_tokens"`
	CacheWriteTokens  int64 `json:"cache_write_tokens"`
	CompletionTokens  int64 `json:"completion_tokens"`
	ReasoningTokens   int64 `json:"reasoning_tokens"`
	WebSearchRequests int64 `json:"web_search_requests,omitempty"`
}

// TotalTokens is PromptTokens + CompletionTokens.
func (u Usage) TotalTokens() int64 { return u.PromptTokens + u.CompletionTokens }

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
	// Endpoint is the gateway path the client called, e.g. "/v1/chat/completions".
	Endpoint string `json:"endpoint"`
	// Stream is true when the response was streamed (SSE).
	Stream bool `json:"stream"`
	// Status is one of the Status constants.
	Status string `json:"status"`
	// HTTPStatus is the status code the gateway sent the client (0 if none was sent).
	HTTPStatus int `json:"http_status"`
	// FinishReason is the upstream's finish reason in OpenAI's terms
	// ("stop", "length", "tool_calls", "content_filter"), when one arrived.
	FinishReason string `json:"finish_reason,omitempty"`
	// Usage holds the normalized token counts.
	Usage Usage `json:"usage"`
	// UsageSource is one of SourceUpstream, SourcePartial, SourceEstimated.
	UsageSource string `json:"usage_source"`
	// TTFTMillis is the time from receiving the request to the first content
	// byte sent to the client, in milliseconds (0 if none was sent).
	TTFTMillis int64 `json:"ttft_ms"`
	// DurationMillis is the time from receiving the request to the end of the
	// response, in milliseconds.
	DurationMillis int64 `json:"duration_ms"`
	// Error is a short description of what went wrong, for failed requests.
	Error string `json:"error,omitempty"`
}

// ErrInvalidEvent is wrapped by Validate's errors.
var ErrInvalidEvent = errors.New("invalid usage event")

// Validate reports whether e can be stored. It returns an error wrapping
// ErrInvalidEvent that names the first field at fault.
func (e *Event) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidEvent, fmt.Sprintf(format, args...))
	}
	switch {
	case e.Version != SchemaVersion:
		return bad("schema version %d, want %d", e.Version, SchemaVersion)
	case uuid.Validate(e.ID) != nil:
		return bad("id %q is not a UUID", e.ID)
	case e.Time.IsZero():
		return bad("time is zero")
	case uuid.Validate(e.CustomerID) != nil:
		return bad("customer_id %q is not a UUID", e.CustomerID)
	case uuid.Validate(e.KeyID) != nil:
		return bad("key_id %q is not a UUID", e.KeyID)
	case e.Model == "":
		return bad("model is empty")
	}
	switch e.Status {
	case StatusOK, StatusUpstreamError, StatusClientCancelled, StatusTimeout, StatusCutOff:
	default:
		return bad("status %q is unknown", e.Status)
	}
	switch e.UsageSource {
	case SourceUpstream, SourcePartial, SourceEstimated:
	default:
		return bad("usage_source %q is unknown", e.UsageSource)
	}
	u := e.Usage
	if u.PromptTokens < 0 || u.CachedTokens < 0 || u.CacheWriteTokens < 0 ||
		u.CompletionTokens < 0 || u.ReasoningTokens < 0 || u.WebSearchRequests < 0 {
		return bad("negative token count")
	}
	return nil
}

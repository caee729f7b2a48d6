package gateway

import (
	"net/http"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/usage"
)

// The contracts between the gateway's core and its protocol packages
// (gateway/openai, gateway/anthropic, gateway/gemini). A protocol package
// knows one provider's wire format; the core knows HTTP, routing, clients
// and the meter. The interfaces live here, beside their one consumer.

// streamTap reads usage from an upstream stream in one wire format, for the
// native pass-through endpoints, whose bytes go to the client unchanged.
type streamTap interface {
	// Event observes one upstream SSE event, in order. It must not keep
	// ev's byte slices, which the reader reuses.
	Event(ev *sse.Event, r *usage.Report)
}

// chatUpstream serves POST /v1/chat/completions from a provider whose wire
// format is not OpenAI's, by translation both ways.
type chatUpstream interface {
	// Request translates the client's OpenAI chat completion request body
	// into the provider's request for upstreamModel: the path below the
	// provider's base URL (with any query) and the body. Its errors are
	// the client's fault and are answered with 400 naming the field.
	Request(body []byte, upstreamModel string, stream bool) (path string, upBody []byte, err error)
	// Header sets the provider's authentication and version headers.
	Header(h http.Header, apiKey string)
	// NewStream starts the translation of one response stream into
	// chat.completion.chunk payloads carrying id, model and created.
	NewStream(id, model string, created int64) chunkStream
	// Body translates a whole non-streamed response into a chat.completion
	// object (JSON) with OpenAI's usage, and taps its usage into r.
	Body(body []byte, id, model string, created int64, r *usage.Report) ([]byte, error)
}

// chunkStream translates one upstream stream, event by event. It is an
// alias of an interface literal, so that protocol packages can name the
// same type (a method returning a named type of this package would not
// match).
type chunkStream = interface {
	// Event taps ev's usage into r and appends the OpenAI chunk payloads
	// it becomes (JSON objects, without the "data: " framing) to dst. An
	// upstream error becomes an OpenAI error payload {"error":{...}}. It
	// never appends a usage chunk or [DONE]: the core adds those.
	Event(ev *sse.Event, r *usage.Report, dst [][]byte) [][]byte
}

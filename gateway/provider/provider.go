// Package provider is the contract between the gateway's core and its
// upstream protocols: each protocol package (gateway/openai,
// gateway/anthropic, gateway/gemini) describes itself as one Provider
// value, and the core, given those values, serves them without naming any.
// Its only behaviour is what every protocol shares: WriteJSONError, and
// CheckPassedBody.
package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Provider is one upstream wire protocol, registered once with the
// gateway: everything the core knows of it. OpenAI's chat completions
// format is the core's own, which every provider serves.
type Provider struct {
	// Type selects it: the providers[].type of the configuration, e.g.
	// "openai" (and every OpenAI-compatible API), "anthropic", "gemini".
	Type string
	// Auth sets the upstream's credential (and any version header) for an
	// API key on an upstream request.
	Auth func(h http.Header, apiKey string)
	// ClientKey returns the customer's API key as this protocol's SDKs
	// send it, or "" (the core also reads "Authorization: Bearer" itself).
	ClientKey func(r *http.Request) string
	// Chat serves POST /v1/chat/completions by translation; nil means the
	// upstream speaks OpenAI chat completions, passed through.
	Chat Chat
	// Errors writes the gateway's errors on the provider's native routes,
	// in the provider's own envelope.
	Errors Envelope
	// Routes are the provider's own endpoints, passed through byte for
	// byte and metered.
	Routes []Route
	// Embeddings serves POST /v1/embeddings on the provider's models; nil
	// when the provider has no embeddings API.
	Embeddings Embeddings
	// Completions is true when the provider serves OpenAI's legacy POST
	// /v1/completions, passed through (OpenAI-compatible APIs).
	Completions bool
	// Counters are the provider's token-counting endpoints, passed
	// through unmetered (the providers do not bill them).
	Counters []Counter
}

// Embeddings translates OpenAI's embeddings API to a provider's.
type Embeddings interface {
	// Request turns the client's OpenAI embeddings request body into the
	// provider's request for upstreamModel: the path below the base URL
	// and the body. Its errors are the client's fault (400).
	Request(body []byte, upstreamModel string) (path string, upBody []byte, err error)
	// Body turns the provider's response into OpenAI's embeddings
	// response (a JSON object, "object":"list") and taps the usage it
	// reports (input tokens) into r; when it reports none, r is left
	// unreported and the gateway fills in its estimate.
	Body(body []byte, model string, r *tap.Report) ([]byte, error)
}

// EmbeddingBatches is implemented by an Embeddings whose provider takes
// at most a number of inputs in one call (Gemini's batchEmbedContents:
// 100 requests), where OpenAI's API takes up to 2048: the gateway sends a
// larger request as several upstream calls, one after another, within the
// request's one exchange (one usage event), and joins their answers.
type EmbeddingBatches interface {
	// Split cuts the upstream body that Request made into bodies of at
	// most the provider's limit of inputs each, in input order, and the
	// number of inputs of each; nil when the body fits one call. Its
	// error is the client's fault (400).
	Split(upBody []byte) (bodies [][]byte, inputs []int, err error)
}

// Counter is a token-counting endpoint of a provider (Anthropic's
// count_tokens, Gemini's countTokens): authenticated, routed like the
// model's requests, relayed as the provider answers, and not metered.
type Counter struct {
	// Pattern, when set, is the chi pattern of its POST route (e.g.
	// "/anthropic/v1/messages/count_tokens"); when empty, Match picks its
	// requests out of one of the provider's Routes.
	Pattern string
	// Match reports whether a request to a Route is this counter's.
	Match func(r *http.Request) bool
	// Read parses a client's request as Route.Read does (its Model,
	// Upstream and Header are used). Its error, an Error, is answered as
	// it is.
	Read func(r *http.Request, body []byte) (Call, error)
}

// Chat translates OpenAI chat completions to a provider's format and back.
type Chat interface {
	// Request translates the client's OpenAI chat completion request body
	// into the provider's request for upstreamModel: the path below the
	// provider's base URL (with any query) and the body. Its errors are
	// the client's fault and are answered with 400 naming the field.
	Request(body []byte, upstreamModel string, stream bool) (path string, upBody []byte, err error)
	// NewStream starts the translation of one response stream into
	// chat.completion.chunk payloads carrying id, model and created.
	NewStream(id, model string, created int64) ChunkStream
	// Body translates a whole non-streamed response into a chat.completion
	// object (JSON) with OpenAI's usage, and taps its usage into r.
	Body(body []byte, id, model string, created int64, r *tap.Report) ([]byte, error)
}

// ChunkStream translates one upstream stream, event by event.
type ChunkStream interface {
	// Event taps ev's usage into r and appends the OpenAI chunk payloads
	// it becomes (JSON objects, without the "data: " framing) to dst. An
	// upstream error becomes an OpenAI error payload {"error":{...}}. It
	// never appends a usage chunk or [DONE]: the core adds those.
	Event(ev *sse.Event, r *tap.Report, dst [][]byte) [][]byte
}

// ChunkStreamEnd is a ChunkStream that holds chunks back until the
// upstream stream has ended, such as each choice's finish chunk when the
// provider may repeat its finish reason on every chunk (Vertex AI's
// Gemini): the relay calls End once the upstream's last event is read,
// unless the stream gave way to another attempt, and sends what it
// appends to dst before the usage chunk and [DONE].
type ChunkStreamEnd interface {
	End(r *tap.Report, dst [][]byte) [][]byte
}

// ChunkStreamBegin is a ChunkStream that holds its first chunk (the role
// chunk) back until the first output, so that a refusal before any (an
// overload right after Anthropic's message_start) has sent the client
// nothing: Begin appends it to dst now, once, when the relay will wait no
// longer for the output (a model slow to begin).
type ChunkStreamBegin interface {
	Begin(dst [][]byte) [][]byte
}

// StreamTap reads usage from an upstream stream in one wire format, for a
// native route, whose bytes go to the client unchanged.
type StreamTap interface {
	// Event observes one upstream SSE event, in order. It must not keep
	// ev's byte slices, which the reader reuses.
	Event(ev *sse.Event, r *tap.Report)
}

// Error is an error the gateway answers itself, in OpenAI's terms; each
// Envelope maps it to its protocol's own.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Type and Code are OpenAI's error type ("invalid_request_error",
	// "authentication_error", "insufficient_quota", "rate_limit_error",
	// "upstream_error", "server_error") and code ("invalid_api_key",
	// "model_not_found", ...).
	Type, Code string
	// Message is for the client to read.
	Message string
}

// Envelope writes errors in a protocol's own shape.
type Envelope interface {
	// WriteError answers the request with e (its status, headers and body).
	WriteError(w http.ResponseWriter, e Error)
	// StreamError is an SSE event (its bytes, framing included) that ends a
	// stream already under way with e, in the protocol's own shape.
	StreamError(e Error) []byte
}

// WriteJSONError answers with status and body, one JSON error object, as
// application/json with a newline after it: the WriteError of an Envelope
// whose protocol answers errors with one JSON object. Write errors are
// dropped: the client is gone.
func WriteJSONError(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// KeyHinter is implemented by an Envelope whose protocol's SDKs send the
// API key their own way: KeyHint says how, for the message of a request
// that sent none (e.g. "send it in the x-api-key header").
type KeyHinter interface {
	KeyHint() string
}

// Route is one native endpoint of a provider.
type Route struct {
	// Pattern is the chi route pattern of POST requests, e.g.
	// "/anthropic/v1/messages" or "/gemini/v1beta/*".
	Pattern string
	// Read parses a client's request (its body already read): what it
	// asks for and how to send it upstream. Its error, an Error, is
	// answered as it is (400 naming the field, or 404).
	Read func(r *http.Request, body []byte) (Call, error)
	// NewTap returns a tap for one streamed response.
	NewTap func() StreamTap
	// BodyUsage taps the usage of a whole response body into r.
	BodyUsage func(body []byte, r *tap.Report) error
	// Answer names the members of which every whole answer body of the
	// route holds one (Anthropic's content, Gemini's candidates or
	// promptFeedback, the Responses API's output). A JSON object under a
	// 200 with none of them, and no usage or error its tap read, is no
	// answer: the provider reported producing nothing, and it bills
	// nothing. Empty: any body is an answer.
	Answer []string
	// PromptText is the request's prompt, for estimates.
	PromptText func(body []byte) tap.Prompt
	// BilledUsage, when set, writes into a whole response body the usage
	// billed (t), in the route's shape, for a body whose usage was not
	// the provider's as it reported it (estimated, partly, or a count the
	// gateway corrected): every client reads what was billed. It returns body unchanged when it cannot.
	BilledUsage func(body []byte, t usage.Tokens) []byte
	// BilledEnd, when set, writes the usage billed (t) into the data of a
	// stream's end event (the one its tap reads as the end,
	// tap.Report.Ended), for a stream whose usage was not the provider's
	// as it reported it: as BilledUsage does for a whole body. It returns data unchanged when
	// it cannot.
	BilledEnd func(data []byte, t usage.Tokens) []byte
	// Errors, when set, replaces the provider's Errors on this route.
	Errors Envelope
	// EndEvent, when set, names the event with which the route's protocol
	// ends every stream, and which its tap reads as the end
	// (tap.Report.Ended): a stream that ends without it (its body closed
	// cleanly after data), and without the provider's final usage report
	// (tap.Report.Final), was cut short upstream, and is recorded as a
	// broken stream is, an upstream error with the usage of what was
	// relayed estimated (unless the provider reported it): the Responses
	// API's response.completed (or .failed, .incomplete), Anthropic's
	// message_stop. Empty: the protocol may end a stream with its body
	// (Gemini's streams are read to their end as they come).
	EndEvent string
}

// Call is one native request, as Route.Read parses it.
type Call struct {
	// Model is the model asked for, as the client named it.
	Model string
	// Stream is true when the client asked for a streamed response (it is
	// recorded on the event); SSE is true when that response is an SSE
	// stream, which the gateway relays event by event (false: one body).
	Stream, SSE bool
	// Endpoint names the route on the event, e.g. "/anthropic/v1/messages".
	Endpoint string
	// Upstream gives the path below the provider's base URL (with any
	// query) and the body to send, for the upstream model's name.
	Upstream func(upstreamModel string) (path string, body []byte, err error)
	// EndUser is the end user the request names in the provider's own
	// field (Anthropic's metadata.user_id; OpenAI's safety_identifier or
	// user), "" when none; Metadata the request's tags, a JSON object whose
	// string values are kept (OpenAI's metadata), nil when none.
	EndUser  string
	Metadata []byte
	// Header holds client headers to pass upstream as they are
	// (anthropic-version, anthropic-beta, say).
	Header http.Header
}

// CheckPassedBody refuses a request body that goes upstream as the client
// sent it (only its model set) when a member named one of names is
// ambiguous (as jsonscan.AmbiguousKey finds them: another case, an escape,
// a repeat): an upstream's parser could read another model or stream flag
// than the gateway checked, routed and billed. It returns nil, or a 400
// Error naming the member.
//
// jsonscan's scanner gives up (jsonscan.AmbiguousKey then reports
// nothing) on a body nested deeper than jsonscan.MaxDepth, which
// encoding/json, and so the gateway's own reading of the body, accepts: a
// deep member (a JSON schema, say) before "background":true,
// "Background":false hid the ambiguity. A body the scanner cannot read to
// its end is checked again with encoding/json's tokenizer.
func CheckPassedBody(body []byte, names ...string) error {
	key, bad, scanned := jsonscan.AmbiguousKey(body, names...)
	if !bad && !scanned {
		key, bad = ambiguousKeyDecoded(body, names...)
	}
	if bad {
		return Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			fmt.Sprintf("the request body's member %q is ambiguous: send each of %v once, spelled exactly so", key, names))
	}
	return nil
}

// FallbackMembers are the request members with which an upstream serves
// other models than the one it was sent, within one round trip, and bills
// the one that served: Anthropic's server-side fallback ("fallbacks":
// "default" or [{"model": …}], beta server-side-fallback-2026-06-01),
// OpenRouter's "models" list (and its Messages endpoint's "fallbacks"),
// LiteLLM's and other gateways' "fallbacks". Every route that passes a
// body on checks them (CheckPassedBody, then CheckOneModel).
var FallbackMembers = []string{"models", "fallbacks"}

// CheckOneModel refuses (400, naming the member) a request member name of
// FallbackMembers whose value raw (nil when absent) names models for the
// upstream to serve in place of the one the gateway routed, checked
// against the key's allowed_models and priced: anything but null and
// "off" (Anthropic's fallback turned off). A request served so was billed
// at the price of the model asked for, whatever model served it, and a key
// reached models outside its allowed_models.
func CheckOneModel(name string, raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || string(raw) == `"off"` {
		return nil
	}
	return Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
		name+": fallback models are not served here: the upstream would serve, and bill, a model the gateway did not route, "+
			"check against the key's allowed_models or price; ask for each model by its own request")
}

// ambiguousKeyDecoded is jsonscan.AmbiguousKey by encoding/json's tokenizer, which
// follows any nesting encoding/json accepts: a top-level member of obj
// that encoding/json would match to one of names (without regard to case,
// after unescaping) but that is not exactly that name once. It reports
// nothing for what is not a valid JSON object (the caller's decoder
// refuses it).
func ambiguousKeyDecoded(obj []byte, names ...string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	seen := make([]bool, len(names))
	for dec.More() {
		from := dec.InputOffset()
		t, err := dec.Token()
		text, isKey := t.(string)
		if err != nil || !isKey {
			return "", false
		}
		raw := bytes.TrimLeft(obj[from:dec.InputOffset()], " \t\r\n,")
		for i, name := range names {
			if !strings.EqualFold(text, name) {
				continue
			}
			if string(raw) != `"`+name+`"` || seen[i] {
				return text, true
			}
			seen[i] = true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// CheckFoldedKeys refuses (400) v, the value of the request body's member
// named member, when an object anywhere in it has two keys that are one
// without regard to case (jsonscan.FoldedKey): the gateway's estimate
// reads such a value with encoding/json, the last of them winning, while
// an upstream that matches keys exactly reads another.
// {"role":"user","content":[a long prompt],"Content":"hi"} sent the long
// prompt, and a cut request was billed the estimate of "hi". A value the
// scanner cannot read to its end (nested deeper than jsonscan.MaxDepth) is
// checked again with encoding/json's tokenizer. The values of members
// named exactly one of opaque (a tool's own JSON, which the estimate
// counts as written, and where keys one in case are the tool's own) are
// not looked into.
func CheckFoldedKeys(member string, v []byte, opaque ...string) error {
	key, bad, scanned := jsonscan.FoldedKey(v, opaque...)
	if !bad && !scanned {
		key, bad = foldedKeyDecoded(json.NewDecoder(bytes.NewReader(v)), opaque)
	}
	if bad {
		return Err(http.StatusBadRequest, "invalid_request_error", "invalid_request",
			fmt.Sprintf("the request body's %s has an object whose member %q is ambiguous: send each member once, spelled exactly so", member, key))
	}
	return nil
}

// foldedKeyDecoded is jsonscan.FoldedKey by encoding/json's tokenizer,
// reading one value from dec; it reports nothing for what is not valid
// JSON (the caller's decoder refuses it).
func foldedKeyDecoded(dec *json.Decoder, opaque []string) (string, bool) {
	t, err := dec.Token()
	if err != nil {
		return "", false
	}
	switch t {
	case json.Delim('{'):
		var keys [][]byte
		for dec.More() {
			k, err := dec.Token()
			text, isKey := k.(string)
			if err != nil || !isKey {
				return "", false
			}
			keys = append(keys, []byte(text))
			if slices.Contains(opaque, text) {
				var skip json.RawMessage
				if dec.Decode(&skip) != nil {
					return "", false
				}
			} else if key, bad := foldedKeyDecoded(dec, opaque); bad {
				return key, true
			}
		}
		if _, err := dec.Token(); err != nil {
			return "", false
		}
		return jsonscan.Folded(keys)
	case json.Delim('['):
		for dec.More() {
			if key, bad := foldedKeyDecoded(dec, opaque); bad {
				return key, true
			}
		}
		_, _ = dec.Token()
	}
	return "", false
}

// Err is a convenience: an Error with the given status, type, code and message.
func Err(status int, typ, code, msg string) Error {
	return Error{Status: status, Type: typ, Code: code, Message: msg}
}

// Error returns the message, as the client is shown it.
func (e Error) Error() string { return e.Message }

// SetMember is jsonscan.SetMember (obj with every top-level member named
// key, byte for byte, set to value, or value added as its last member),
// for any JSON object encoding/json reads: jsonscan's scanner refuses
// objects nested deeper than jsonscan.MaxDepth, which the gateway reads
// (with encoding/json) and the providers take, so that a request with a
// deep JSON schema was refused, as "not a JSON object", on the routes
// that set the model on the client's body. Those are done with
// encoding/json's tokenizer.
func SetMember(obj []byte, key string, value []byte) ([]byte, error) {
	b, err := jsonscan.SetMember(obj, key, value)
	if err == nil || !json.Valid(obj) {
		return b, err
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, jsonscan.ErrNotObject
	}
	var spans [][2]int64
	members := 0
	for ; dec.More(); members++ {
		from := dec.InputOffset()
		if _, err := dec.Token(); err != nil {
			return nil, jsonscan.ErrNotObject
		}
		raw := bytes.TrimLeft(obj[from:dec.InputOffset()], " \t\r\n,")
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, jsonscan.ErrNotObject
		}
		if string(raw) == `"`+key+`"` {
			end := dec.InputOffset()
			spans = append(spans, [2]int64{end - int64(len(v)), end})
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, jsonscan.ErrNotObject
	}
	closing := dec.InputOffset() - 1
	out := make([]byte, 0, len(obj)+len(key)+len(value)+4)
	at := int64(0)
	for _, s := range spans {
		out = append(append(out, obj[at:s[0]]...), value...)
		at = s[1]
	}
	if len(spans) == 0 {
		out = append(out, obj[:closing]...)
		if members > 0 {
			out = append(out, ',')
		}
		out = append(append(append(append(out, '"'), key...), `":`...), value...)
		at = closing
	}
	return append(out, obj[at:]...), nil
}

package sim

import (
	"encoding/json"
	"strconv"
)

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// TokenText is the text of one content token: a completion with n content
// tokens has the content TokenText repeated n times.
const TokenText = "tok "

// tokenRun is TokenText repeated, appended in runs rather than word by word.
const tokenRun = TokenText + TokenText + TokenText + TokenText + TokenText + TokenText + TokenText + TokenText +
	TokenText + TokenText + TokenText + TokenText + TokenText + TokenText + TokenText + TokenText

// Pre-encoded pieces of the wire format. Chunks are built by appending these
// to a per-request prefix, with no reflection.
const (
	chunkRole    = `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}]`
	chunkContent = `{"index":0,"delta":{"content":"`
	chunkContEnd = `"},"finish_reason":null}]`
	chunkFinish  = `{"index":0,"delta":{},"finish_reason":"`
	frameEnd     = "}\n\n"
	frameDone    = "data: [DONE]\n\n"
)

// appendTokens appends n content tokens.
func appendTokens(b []byte, n int64) []byte {
	for ; n >= 16; n -= 16 {
		b = append(b, tokenRun...)
	}
	return append(b, tokenRun[:n*int64(len(TokenText))]...)
}

// appendHead appends the fields every chunk or completion of p starts with,
// up to and including "model".
func appendHead(b []byte, p *plan, object string) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, p.id...)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, p.created, 10)
	b = append(b, `,"model":`...)
	return append(b, p.modelJSON...)
}

// appendChunkPrefix appends the part of an SSE frame of p that comes before
// the choices: `data: {"id":...,"choices":[`.
func appendChunkPrefix(b []byte, p *plan) []byte {
	b = append(b, "data: "...)
	b = appendHead(b, p, "chat.completion.chunk")
	return append(b, `,"service_tier":"default","system_fingerprint":null,"choices":[`...)
}

// appendUsage appends u as OpenAI's usage object.
func appendUsage(b []byte, u Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, u.CompletionTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, u.TotalTokens(), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, u.CachedTokens, 10)
	b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, u.ReasoningTokens, 10)
	return append(b, `,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

// openaiEncoder writes Chat Completions chunks.
type openaiEncoder struct {
	p      *plan
	prefix []byte // `data: {"id":...,"choices":[`
	sent   Usage  // the usage billed by the frames written so far
}

// finishReason is the finish_reason of p.
func (p *plan) finishReason() string {
	if p.toolCall != "" {
		return "tool_calls"
	}
	if p.capped {
		return "length"
	}
	return "stop"
}

func (e *openaiEncoder) start(b []byte, u Usage) []byte {
	e.sent = u
	b = append(b, e.prefix...)
	if e.p.toolCall != "" { // the call's header, its arguments opened
		b = append(b, `{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_`...)
		b = append(b, e.p.id[len("chatcmpl-"):]...)
		b = append(b, `","type":"function","function":{"name":`...)
		b = appendJSONString(b, e.p.toolCall)
		b = append(b, `,"arguments":"{\"text\":\""}}]},"finish_reason":null}]`...)
		return e.end(b, e.cumulative(u))
	}
	return e.end(append(b, chunkRole...), e.cumulative(u))
}

func (e *openaiEncoder) content(b []byte, k int64, u Usage, _ bool) []byte {
	e.sent = u
	b = append(b, e.prefix...)
	if e.p.toolCall != "" {
		b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"`...)
		b = appendTokens(b, k)
		return e.end(append(b, `"}}]},"finish_reason":null}]`...), e.cumulative(u))
	}
	b = append(b, chunkContent...)
	b = appendTokens(b, k)
	return e.end(append(b, chunkContEnd...), e.cumulative(u))
}

func (e *openaiEncoder) finishes() bool { return true }

// finish writes the finish chunk, the usage chunk and [DONE], as asked.
func (e *openaiEncoder) finish(st *streamer) error {
	p := e.p
	var final *Usage
	if p.fault.cumulative || p.fault.usageInFinish {
		final = &p.usage
	}
	b := append(st.buf[:0], e.prefix...)
	if p.toolCall != "" { // the arguments closed
		b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]},"finish_reason":"`...)
	} else {
		b = append(b, chunkFinish...)
	}
	b = append(b, p.finishReason()...)
	st.buf = e.end(append(b, `"}]`...), final)
	if err := st.write(st.buf); err != nil {
		return err
	}
	if p.includeUsage && !p.fault.usageInFinish && !p.fault.noUsage {
		st.buf = e.end(append(append(st.buf[:0], e.prefix...), ']'), &p.usage)
		if err := st.write(st.buf); err != nil {
			return err
		}
	}
	if !p.fault.noDone {
		return st.write(append(st.buf[:0], frameDone...))
	}
	return nil
}

func (e *openaiEncoder) streamError(st *streamer, after int64) {
	var u *Usage
	if e.p.fault.usageInError && !e.p.fault.noUsage {
		r := e.p.reported(e.sent)
		u = &r
	}
	st.buf = appendErrorFrame(st.buf[:0], after, u)
	if st.write(st.buf) == nil && !e.p.fault.noDone {
		_ = st.write(append(st.buf[:0], frameDone...))
	}
}

// cumulative returns u when every chunk carries the usage so far, else nil.
func (e *openaiEncoder) cumulative(u Usage) *Usage {
	if e.p.fault.cumulative {
		return &u
	}
	return nil
}

// end finishes the frame in b with its usage key: u when not nil, else
// "usage":null when include_usage asked for usage, else none; never one
// under no_usage.
func (e *openaiEncoder) end(b []byte, u *Usage) []byte {
	switch {
	case e.p.fault.noUsage:
	case u != nil:
		b = appendUsage(append(b, `,"usage":`...), e.p.reported(*u))
	case e.p.includeUsage:
		b = append(b, `,"usage":null`...)
	}
	return append(b, frameEnd...)
}

// appendCompletion appends the non-streamed chat.completion object of p.
func appendCompletion(b []byte, p *plan) []byte {
	b = appendHead(b, p, "chat.completion")
	if p.toolCall != "" {
		b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_`...)
		b = append(b, p.id[len("chatcmpl-"):]...)
		b = append(b, `","type":"function","function":{"name":`...)
		b = appendJSONString(b, p.toolCall)
		b = append(b, `,"arguments":"{\"text\":\"`...)
		b = appendTokens(b, p.contentTokens)
		b = append(b, `\"}"}}],"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"`...)
	} else {
		b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
		b = appendTokens(b, p.contentTokens)
		b = append(b, `","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"`...)
	}
	b = append(b, p.finishReason()...)
	b = append(b, `"}],"usage":`...)
	b = appendUsage(b, p.reported(p.usage))
	return append(b, `,"service_tier":"default","system_fingerprint":null}`...)
}

// appendErrorFrame appends the SSE frame error_after sends; with u, the
// frame also carries the usage billed so far (usage_in_error).
func appendErrorFrame(b []byte, after int64, u *Usage) []byte {
	b = append(b, `data: {"error":{"message":"simulated stream error after `...)
	b = strconv.AppendInt(b, after, 10)
	b = append(b, ` content chunks","type":"server_error","param":null,"code":null}`...)
	if u != nil {
		b = appendUsage(append(b, `,"usage":`...), *u)
	}
	return append(b, frameEnd...)
}

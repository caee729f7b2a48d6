package sim

import "strconv"

// ThinkingSignature is the signature of every thinking block the simulator
// sends (base64 of "simulated").
const ThinkingSignature = "c2ltdWxhdGVk"

// Pre-encoded pieces of the Messages wire format.
const (
	anthStart      = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":"
	anthPing       = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
	anthBlockStart = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"
	anthThinking   = `,"content_block":{"type":"thinking","thinking":"","signature":""}}` + "\n\n"
	anthText       = `,"content_block":{"type":"text","text":""}}` + "\n\n"
	anthDelta      = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"
	anthBlockStop  = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"
	anthMsgStop    = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

// anthropicEncoder writes Messages stream events.
type anthropicEncoder struct{ p *plan }

// stopReason is the stop_reason of p.
func (p *plan) stopReason() string {
	if p.capped {
		return "max_tokens"
	}
	return "end_turn"
}

// textIndex is the index of the text block: 1 after a thinking block.
func (p *plan) textIndex() int64 {
	if p.usage.ReasoningTokens > 0 {
		return 1
	}
	return 0
}

// start appends message_start (output_tokens 1), a ping, the whole thinking
// block when the model reasons, and the start of the text block.
func (e *anthropicEncoder) start(b []byte, _ Usage) []byte {
	p := e.p
	b = append(b, anthStart...)
	b = appendMessageHead(b, p)
	b = append(b, `"content":[],"stop_reason":null,"stop_sequence":null`...)
	b = e.usage(b, 1)
	b = append(b, "}}\n\n"...)
	b = append(b, anthPing...)
	if r := p.usage.ReasoningTokens; r > 0 {
		b = append(append(b, anthBlockStart...), '0')
		b = append(b, anthThinking...)
		b = append(b, anthDelta+`0,"delta":{"type":"thinking_delta","thinking":"`...)
		b = appendTokens(b, r)
		b = append(b, "\"}}\n\n"...)
		b = append(b, anthDelta+`0,"delta":{"type":"signature_delta","signature":"`+ThinkingSignature+"\"}}\n\n"...)
		b = append(b, anthBlockStop+"0}\n\n"...)
	}
	b = strconv.AppendInt(append(b, anthBlockStart...), p.textIndex(), 10)
	return append(b, anthText...)
}

func (e *anthropicEncoder) content(b []byte, k int64, _ Usage, _ bool) []byte {
	b = strconv.AppendInt(append(b, anthDelta...), e.p.textIndex(), 10)
	b = append(b, `,"delta":{"type":"text_delta","text":"`...)
	b = appendTokens(b, k)
	return append(b, "\"}}\n\n"...)
}

func (e *anthropicEncoder) finishes() bool { return true }

// finish writes content_block_stop, message_delta with the final usage and
// message_stop, each flushed.
func (e *anthropicEncoder) finish(st *streamer) error {
	p := e.p
	b := strconv.AppendInt(append(st.buf[:0], anthBlockStop...), p.textIndex(), 10)
	st.buf = append(b, "}\n\n"...)
	if err := st.write(st.buf); err != nil {
		return err
	}
	b = append(st.buf[:0], "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	b = append(b, p.stopReason()...)
	b = append(b, `","stop_sequence":null}`...)
	b = e.usage(b, p.usage.CompletionTokens)
	st.buf = append(b, "}\n\n"...)
	if err := st.write(st.buf); err != nil {
		return err
	}
	if p.fault.noDone {
		return nil
	}
	return st.write(append(st.buf[:0], anthMsgStop...))
}

// streamError writes an error event, as Anthropic does when it is
// overloaded mid-stream: no message_delta or message_stop follows.
func (e *anthropicEncoder) streamError(st *streamer, after int64) {
	b := append(st.buf[:0], "event: error\ndata: {\"type\":\"error\",\"error\":{\"details\":null,"+
		"\"type\":\"overloaded_error\",\"message\":\"Overloaded: simulated stream error after "...)
	b = strconv.AppendInt(b, after, 10)
	st.buf = append(b, " content chunks\"}}\n\n"...)
	_ = st.write(st.buf)
}

// usage appends `,"usage":{...}` with output tokens, unless no_usage.
func (e *anthropicEncoder) usage(b []byte, output int64) []byte {
	if e.p.fault.noUsage {
		return b
	}
	return appendAnthropicUsage(append(b, `,"usage":`...), e.p.usage, output)
}

// appendAnthropicUsage appends u as Anthropic's usage object with output
// tokens: input_tokens excludes the cache read.
func appendAnthropicUsage(b []byte, u Usage, output int64) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens-u.CachedTokens, 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, u.CachedTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, output, 10)
	return append(b, '}')
}

// appendMessageHead appends `{"id":...,"model":...,` of a message.
func appendMessageHead(b []byte, p *plan) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, p.id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = append(b, p.modelJSON...)
	return append(b, ',')
}

// appendMessage appends the non-streamed message object of p.
func appendMessage(b []byte, p *plan) []byte {
	b = appendMessageHead(b, p)
	b = append(b, `"content":[`...)
	if r := p.usage.ReasoningTokens; r > 0 {
		b = append(b, `{"type":"thinking","thinking":"`...)
		b = appendTokens(b, r)
		b = append(b, `","signature":"`+ThinkingSignature+`"},`...)
	}
	b = append(b, `{"type":"text","text":"`...)
	b = appendTokens(b, p.contentTokens)
	b = append(b, `"}],"stop_reason":"`...)
	b = append(b, p.stopReason()...)
	b = append(b, `","stop_sequence":null,"usage":`...)
	b = appendAnthropicUsage(b, p.usage, p.usage.CompletionTokens)
	return append(b, '}')
}

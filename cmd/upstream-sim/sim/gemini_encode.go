package sim

import "strconv"

// Pre-encoded pieces of the generateContent wire format, with the ": "
// spacing Gemini uses. SSE frames end in "\r\n\r\n" as Gemini's do.
const (
	gemFrame      = "data: "
	gemFrameEnd   = "}\r\n\r\n"
	gemCandidates = `{"candidates": [{"content": {"parts": [`
	gemThought    = `{"text": "`
	gemThoughtEnd = `","thought": true}`
	gemText       = `{"text": "`
	gemTextEnd    = `"}`
	gemRole       = `],"role": "model"}`
)

// geminiEncoder writes streamGenerateContent?alt=sse chunks.
type geminiEncoder struct{ p *plan }

// geminiFinishReason is the finishReason of p.
func (p *plan) geminiFinishReason() string {
	if p.capped {
		return "MAX_TOKENS"
	}
	return "STOP"
}

// start appends the thought chunk when the request asked for thoughts and
// the model reasons; otherwise nothing (the stream opens with its headers).
func (e *geminiEncoder) start(b []byte, u Usage) []byte {
	if !e.p.thoughts || e.p.usage.ReasoningTokens == 0 {
		return b
	}
	b = append(b, gemFrame+gemCandidates+gemThought...)
	b = appendTokens(b, e.p.usage.ReasoningTokens)
	b = append(b, gemThoughtEnd+gemRole...)
	return e.end(b, u, false)
}

// content appends a text chunk; the last one carries finishReason.
func (e *geminiEncoder) content(b []byte, k int64, u Usage, last bool) []byte {
	b = append(b, gemFrame+gemCandidates+gemText...)
	b = appendTokens(b, k)
	b = append(b, gemTextEnd+gemRole...)
	return e.end(b, u, last)
}

// end appends the rest of a chunk after the content: finishReason when last,
// the usage so far (every chunk; the last only under usage_in_finish; none
// under no_usage), modelVersion and responseId.
func (e *geminiEncoder) end(b []byte, u Usage, last bool) []byte {
	p := e.p
	if last {
		b = append(append(b, `,"finishReason": "`...), p.geminiFinishReason()...)
		b = append(b, '"')
	}
	b = append(b, `,"index": 0}]`...)
	if !p.fault.noUsage && (last || !p.fault.usageInFinish) {
		b = appendUsageMetadata(b, u)
	}
	return append(appendGeminiTail(b, p), gemFrameEnd...)
}

func (e *geminiEncoder) finishes() bool            { return false }
func (e *geminiEncoder) finish(st *streamer) error { return nil }

// streamError writes a pretty-printed error body with no data: framing, as
// Vertex does when a stream fails midway; the response then ends.
func (e *geminiEncoder) streamError(st *streamer, after int64) {
	st.buf = appendGeminiError(st.buf[:0], 503,
		"The model is overloaded: simulated stream error after "+strconv.FormatInt(after, 10)+" content chunks")
	_ = st.write(st.buf)
}

// appendUsageMetadata appends `,"usageMetadata": {...}` for the cumulative
// usage u: candidatesTokenCount (absent while zero) excludes the thoughts,
// totalTokenCount includes them.
func appendUsageMetadata(b []byte, u Usage) []byte {
	b = append(b, `,"usageMetadata": {"promptTokenCount": `...)
	b = strconv.AppendInt(b, u.PromptTokens, 10)
	if c := u.CompletionTokens - u.ReasoningTokens; c > 0 {
		b = append(b, `,"candidatesTokenCount": `...)
		b = strconv.AppendInt(b, c, 10)
	}
	b = append(b, `,"totalTokenCount": `...)
	b = strconv.AppendInt(b, u.TotalTokens(), 10)
	if u.CachedTokens > 0 {
		b = append(b, `,"cachedContentTokenCount": `...)
		b = strconv.AppendInt(b, u.CachedTokens, 10)
	}
	b = append(b, `,"promptTokensDetails": [{"modality": "TEXT","tokenCount": `...)
	b = strconv.AppendInt(b, u.PromptTokens, 10)
	b = append(b, "}]"...)
	if u.CachedTokens > 0 {
		b = append(b, `,"cacheTokensDetails": [{"modality": "TEXT","tokenCount": `...)
		b = strconv.AppendInt(b, u.CachedTokens, 10)
		b = append(b, "}]"...)
	}
	if u.ReasoningTokens > 0 {
		b = append(b, `,"thoughtsTokenCount": `...)
		b = strconv.AppendInt(b, u.ReasoningTokens, 10)
	}
	return append(b, '}')
}

// appendGeminiTail appends `,"modelVersion": ...,"responseId": ...` (no
// closing brace).
func appendGeminiTail(b []byte, p *plan) []byte {
	b = append(b, `,"modelVersion": `...)
	b = append(b, p.modelJSON...)
	b = append(b, `,"responseId": "`...)
	b = append(b, p.id...)
	return append(b, '"')
}

// appendGeminiResponse appends the non-streamed GenerateContentResponse of p
// (compact; the caller indents it).
func appendGeminiResponse(b []byte, p *plan) []byte {
	b = append(b, gemCandidates...)
	if p.thoughts && p.usage.ReasoningTokens > 0 {
		b = append(b, gemThought...)
		b = appendTokens(b, p.usage.ReasoningTokens)
		b = append(b, gemThoughtEnd+","...)
	}
	b = append(b, gemText...)
	b = appendTokens(b, p.contentTokens)
	b = append(b, gemTextEnd+gemRole+`,"finishReason": "`...)
	b = append(b, p.geminiFinishReason()...)
	b = append(b, `","index": 0}]`...)
	b = appendUsageMetadata(b, p.usage)
	return append(appendGeminiTail(b, p), '}')
}

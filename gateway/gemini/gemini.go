// Package gemini speaks Google's Gemini API wire format (generateContent,
// and streamGenerateContent with or without ?alt=sse): it taps usage from
// responses for the native pass-through route, and translates OpenAI chat
// completions to and from it.
//
// Sources, the Gemini API reference (v1beta):
//   - GenerateContentResponse, Candidate, FinishReason, PromptFeedback and
//     UsageMetadata (promptTokenCount, cachedContentTokenCount,
//     candidatesTokenCount, toolUsePromptTokenCount, thoughtsTokenCount,
//     totalTokenCount): https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse
//     and https://ai.google.dev/api/generate-content#UsageMetadata
//   - models.generateContent and models.streamGenerateContent, the request
//     body, GenerationConfig and ThinkingConfig:
//     https://ai.google.dev/api/generate-content
//   - Content, Part, Blob, FileData, FunctionCall, FunctionResponse:
//     https://ai.google.dev/api/caching#Content
//   - Tool, FunctionDeclaration, ToolConfig, FunctionCallingConfig:
//     https://ai.google.dev/api/caching#Tool
//   - Errors are google.rpc.Status as JSON, {"error":{"code","message","status"}}:
//     https://ai.google.dev/gemini-api/docs/troubleshooting
//   - Thought signatures: https://ai.google.dev/gemini-api/docs/thought-signatures
//
// Usage rules (DESIGN.md, "Usage on the wire"): usageMetadata is cumulative
// and repeated on every chunk, so the last one seen replaces all before it
// (never summed, never the maximum: promptTokenCount can go down between
// chunks). promptTokenCount already includes cachedContentTokenCount.
package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// response is the part of a GenerateContentResponse (one stream chunk, or a
// whole non-streamed response) that the package reads. Error is set when the
// value is a google.rpc.Status error body instead.
type response struct {
	Candidates     []candidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *usageMetadata  `json:"usageMetadata"`
	ModelVersion  string          `json:"modelVersion"`
	Error         json.RawMessage `json:"error"`
	// shadow is the chunk, when decode found a member on the path to its
	// output that a case-sensitive client reads otherwise (see shadowed):
	// counted as output whole.
	shadow []byte
}

// candidate is one Candidate: its content so far and, on its last chunk,
// the finish reason.
type candidate struct {
	Content struct {
		Parts []part `json:"parts"`
	} `json:"content"`
	FinishReason string `json:"finishReason"`
	Index        int    `json:"index"`
}

// part is one Part of a Content. Thought parts (thought summaries, with
// includeThoughts) carry their text in Text too. ExecutableCode and
// CodeExecutionResult are the code execution tool's parts (Gemini API
// reference, "Part": executableCode {language, code},
// codeExecutionResult {outcome, output}): text that reaches the client
// like any other, counted for an estimate and as late output.
type part struct {
	Text                string        `json:"text"`
	Thought             bool          `json:"thought"`
	FunctionCall        *functionCall `json:"functionCall"`
	ExecutableCode      *codePart     `json:"executableCode"`
	CodeExecutionResult *codePart     `json:"codeExecutionResult"`
}

// codePart is an ExecutableCode (its code) or a CodeExecutionResult (its
// output).
type codePart struct {
	Code   string `json:"code"`
	Output string `json:"output"`
}

// functionCall is a FunctionCall part: a tool call, complete in one part.
type functionCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// usageMetadata is UsageMetadata. Counts are int32 in Google's protos,
// which proto3's JSON mapping lets a server write as a number in any form
// (150, 150.0, 1.5e2) or as a string ("150"); see count.
type usageMetadata struct {
	PromptTokenCount        tap.Count `json:"promptTokenCount"`
	CachedContentTokenCount tap.Count `json:"cachedContentTokenCount"`
	CandidatesTokenCount    tap.Count `json:"candidatesTokenCount"`
	ToolUsePromptTokenCount tap.Count `json:"toolUsePromptTokenCount"`
	ThoughtsTokenCount      tap.Count `json:"thoughtsTokenCount"`
	TotalTokenCount         tap.Count `json:"totalTokenCount"`
}

// readable reports whether every count that is billed could be read. A
// usageMetadata with one that could not is no usage report at all: billing
// its other counts, or zero for it, would pass a figure Google never sent
// for the provider's (totalTokenCount is not billed, so it does not count).
func (u *usageMetadata) readable() bool {
	return u.PromptTokenCount >= 0 && u.CachedContentTokenCount >= 0 && u.CandidatesTokenCount >= 0 &&
		u.ToolUsePromptTokenCount >= 0 && u.ThoughtsTokenCount >= 0
}

// meter normalizes u: prompt = promptTokenCount (cache reads included) +
// toolUsePromptTokenCount; cached = cachedContentTokenCount; completion =
// candidatesTokenCount + thoughtsTokenCount; reasoning = thoughtsTokenCount.
// Only a readable u is metered; sums saturate instead of overflowing.
func (u *usageMetadata) meter() usage.Tokens {
	return usage.Tokens{
		PromptTokens:     sum(int64(u.PromptTokenCount), int64(u.ToolUsePromptTokenCount)),
		CachedTokens:     max(int64(u.CachedContentTokenCount), 0),
		CompletionTokens: sum(int64(u.CandidatesTokenCount), int64(u.ThoughtsTokenCount)),
		ReasoningTokens:  max(int64(u.ThoughtsTokenCount), 0),
	}
}

func sum(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// decode appends to dst the responses b holds: one JSON object, or a JSON
// array of them (what streamGenerateContent returns without alt=sse). Values
// that are not JSON, and array elements that are not objects, are skipped. A
// field of the wrong type is skipped, not the whole response.
func decode(b []byte, dst []response) []response {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return dst
	}
	switch b[0] {
	case '{':
		dst = append(dst, response{})
		if decodeObject(b, &dst[len(dst)-1]) {
			if shadowed(b) {
				dst[len(dst)-1].shadow = b
			}
			return dst
		}
		dst = dst[:len(dst)-1]
	case '[':
		var elems []json.RawMessage
		if json.Unmarshal(b, &elems) == nil {
			for _, e := range elems {
				if len(e) > 0 && e[0] == '{' {
					dst = decode(e, dst)
				}
			}
			return dst
		}
	}
	if shallow, ok := jsonscan.Shallow(b); ok {
		// Valid JSON nested past encoding/json's 10,000 levels (a hostile
		// upstream's member beside the response's own): read as its
		// members within jsonscan.MaxDepth levels.
		return decode(shallow, dst)
	}
	return dst
}

// decodeObject decodes one object into resp, reporting whether it was JSON.
// encoding/json checks the syntax of the whole value before decoding, and a
// type mismatch only skips the field at fault, so a partial resp is kept.
// On a mismatch, though, encoding/json may have allocated UsageMetadata for
// a value that is not an object: it is dropped then, so that only a real
// usageMetadata object counts as reported usage.
func decodeObject(b []byte, resp *response) bool {
	err := json.Unmarshal(b, resp)
	if err == nil {
		return true
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return false
	}
	if resp.UsageMetadata != nil {
		var probe struct {
			U json.RawMessage `json:"usageMetadata"`
		}
		_ = json.Unmarshal(b, &probe)
		if u := bytes.TrimSpace(probe.U); len(u) == 0 || u[0] != '{' {
			resp.UsageMetadata = nil
		}
	}
	return true
}

// apiError is google.rpc.Status as Google's JSON error bodies carry it.
type apiError struct {
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Status  string          `json:"status"`
}

// errorOf describes a response's error field for usage.Report.Error, such
// as "gemini error 499 CANCELLED: The operation was cancelled.", and returns
// its status (or else its numeric code) for an OpenAI error's code. It
// returns "" when the field is absent or null.
func errorOf(raw json.RawMessage) (desc, code string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", ""
	}
	var e apiError
	if raw[0] != '{' || !decodeError(raw, &e) {
		return clean("gemini error: "+string(raw), 300), ""
	}
	num := clean(string(bytes.Trim(e.Code, `"`)), 20)
	desc = "gemini error"
	for _, s := range []string{num, e.Status} {
		if s != "" {
			desc += " " + s
		}
	}
	if e.Message != "" {
		desc += ": " + e.Message
	}
	code = e.Status
	if code == "" {
		code = num
	}
	return clean(desc, 1000), clean(code, 100)
}

func decodeError(raw []byte, e *apiError) bool {
	err := json.Unmarshal(raw, e)
	var te *json.UnmarshalTypeError
	return err == nil || errors.As(err, &te)
}

// clean makes s fit to record in the ledger: valid UTF-8, no NUL (which
// Postgres text refuses), at most about n bytes. It allocates only when it
// changes s.
func clean(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// finishReason maps a Gemini Candidate.finishReason to OpenAI's
// finish_reason: STOP is "stop", or "tool_calls" when the response contained
// a functionCall part (Gemini has no finish reason of its own for tool
// calls); MAX_TOKENS is "length"; SAFETY, RECITATION, BLOCKLIST,
// PROHIBITED_CONTENT, SPII, IMAGE_SAFETY, IMAGE_PROHIBITED_CONTENT and
// IMAGE_RECITATION (blocked output) are "content_filter". Every other value
// (FINISH_REASON_UNSPECIFIED, OTHER, LANGUAGE, MALFORMED_FUNCTION_CALL,
// UNEXPECTED_TOOL_CALL, and values added later) is "stop": generation ended
// for a reason OpenAI's vocabulary has no word for.
func finishReason(reason string, calls bool) string {
	switch reason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return "content_filter"
	case "STOP":
		if calls {
			return "tool_calls"
		}
	}
	return "stop"
}

// errorPayload renders an upstream error as OpenAI's error object.
func errorPayload(desc, code string) []byte {
	b := []byte(`{"error":{"message":`)
	b = openai.AppendString(b, desc)
	b = append(b, `,"type":"upstream_error","param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = openai.AppendString(b, code)
	}
	return append(b, "}}"...)
}

// callIDPrefix returns the opening of the tool call ids of the answer
// whose chat completion id is id: "call_" and id without "chatcmpl-".
// Gemini gives function calls no id; OpenAI's are unique, and clients key
// calls and their results on them, so each names its answer (see callID).
func callIDPrefix(id string) string {
	return "call_" + strings.TrimPrefix(id, "chatcmpl-") + "_"
}

// callID returns the id of call i (counting from 0) of choice choice:
// prefix (see callIDPrefix), then "<choice>_<i>". Request finds a call's
// function name from its id whatever its form.
func callID(prefix string, choice, i int) string {
	return prefix + strconv.Itoa(choice) + "_" + strconv.Itoa(i)
}

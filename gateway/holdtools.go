package gateway

import (
	"strings"

	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// toolPromptTokens bounds the tool use system prompt Anthropic adds to a
// Messages request with tools, in tokens: at most 530 by its table
// (Claude 3 Opus, tool_choice auto; 346 on current models), billed as
// input and not in the body.
const toolPromptTokens = 1024

// definedToolTokens bounds the input an Anthropic-defined tool (an entry
// of tools with a type other than "custom": the text editor, bash,
// computer use…) bills beyond its entry, in tokens: its definition, which
// Anthropic writes (the text editor's 700 tokens, bash's 245, computer
// use's 735 and its system prompt's 499, the largest published).
const definedToolTokens = 2048

// hiddenPromptTokens is the most input, in tokens, a request body sent
// upstream at path bills beyond what the body holds, that the gateway can
// bound: on Anthropic's Messages API, with a non-empty tools array, the
// tool use system prompt (toolPromptTokens) and each Anthropic-defined
// tool's definition (definedToolTokens). Without it a request of a
// hundred bytes with the text editor held a seventh of what it billed.
// Other APIs, and what no bound holds (tool results fetched by the
// provider, MCP servers' tools), add nothing.
func hiddenPromptTokens(body []byte, path string) int64 {
	if path, _, _ = strings.Cut(path, "?"); !strings.HasSuffix(path, "/messages") { // as outputAPIOf tells Messages
		return 0
	}
	l := jsonscan.New(body)
	if !l.Lit("{") || l.Lit("}") {
		return 0
	}
	most := int64(0)
	for {
		raw, escaped, ok := l.Span()
		if !ok || !l.Lit(":") {
			return most
		}
		name := string(raw)
		if escaped {
			name = string(jsonscan.Unquote(nil, raw))
		}
		if name == "tools" && l.Peek() == '[' {
			most = max(most, toolsTokens(body, &l))
		} else if !l.Skip() {
			return most
		}
		if !l.Lit(",") {
			return most
		}
	}
}

// toolsTokens consumes a Messages tools array at l, a lexer of body, and
// returns the input it bills beyond its bytes, in tokens
// (hiddenPromptTokens); 0 when empty.
func toolsTokens(body []byte, l *jsonscan.Lexer) int64 {
	n, defined := int64(0), int64(0)
	l.Array(func() bool {
		n++
		at := l.Pos()
		if !l.Skip() {
			return false
		}
		if toolDefined(body[at:l.Pos()]) {
			defined++
		}
		return true
	})
	if n == 0 {
		return 0
	}
	return toolPromptTokens + defined*definedToolTokens
}

// toolDefined reports whether a tools entry is an Anthropic-defined tool:
// an object whose type is a string other than "custom" (a client's own
// tool has no type, or "custom").
func toolDefined(entry []byte) bool {
	l := jsonscan.New(entry)
	if !l.Lit("{") || l.Lit("}") {
		return false
	}
	for {
		raw, escaped, ok := l.Span()
		if !ok || !l.Lit(":") {
			return false
		}
		name := string(raw)
		if escaped {
			name = string(jsonscan.Unquote(nil, raw))
		}
		if name == "type" && l.Peek() == '"' {
			v, ok := l.Str(nil)
			return ok && string(v) != "custom"
		}
		if !l.Skip() || !l.Lit(",") {
			return false
		}
	}
}

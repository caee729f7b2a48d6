package openai

import (
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

func TestParseChunkLenient(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		created    int64
		text       string // the first choice's delta text, content then refusal
		args       string // its first tool call's arguments
		usage      *usage.Tokens
		unreadable bool
	}{
		{name: "float created", data: `{"created":1700000000.5,"choices":[{"delta":{"content":"hi"}}]}`, created: 1700000000, text: "hi"},
		{name: "content parts", data: `{"choices":[{"delta":{"content":[{"type":"text","text":"a"},"b",{"type":"image"}],"refusal":[{"text":"c"}]}}]}`, text: "abc"},
		{name: "arguments as an object", data: `{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":{"x":1}}}]}}]}`, args: `{"x":1}`},
		{name: "content of another type", data: `{"choices":[{"delta":{"content":5}}]}`},
		{name: "integral floats", data: `{"choices":[],"usage":{"prompt_tokens":11.0,"completion_tokens":1.5e2,"total_tokens":"161","prompt_tokens_details":{"cached_tokens":"3"}}}`,
			usage: &usage.Tokens{PromptTokens: 11, CachedTokens: 3, CompletionTokens: 150}},
		{name: "a fraction", data: `{"choices":[],"usage":{"prompt_tokens":11.5,"completion_tokens":150}}`, unreadable: true},
		{name: "a negative", data: `{"choices":[],"usage":{"prompt_tokens":-1,"completion_tokens":150}}`, unreadable: true},
		{name: "beyond float precision", data: `{"choices":[],"usage":{"prompt_tokens":1e400}}`, unreadable: true},
		{name: "a word", data: `{"choices":[],"usage":{"completion_tokens_details":{"reasoning_tokens":"many"}}}`, unreadable: true},
		{name: "a count of another type", data: `{"choices":[],"usage":{"prompt_tokens":[1]}}`, unreadable: true},
		{name: "usage under another case", data: `{"choices":[],"Usage":{"prompt_tokens":10.5,"completion_tokens":7}}`, unreadable: true},
		{name: "a count under another case", data: `{"choices":[],"usage":{"Prompt_Tokens":10.5,"completion_tokens":7}}`, unreadable: true},
		{name: "details under another case", data: `{"choices":[],"usage":{"prompt_tokens":9.0,"Completion_Tokens_Details":{"reasoning_tokens":"x"}}}`, unreadable: true},
		{name: "usage of another type", data: `{"choices":[],"usage":"lots"}`, unreadable: true},
		// A count given as an object is left by the fixes and fails the
		// decode: it would be read as 0 (here the cached subset, billing
		// the whole prompt at the uncached price).
		{name: "a count as an object", data: `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":{"n":8}}}}`, unreadable: true},
		// "usage" and "Usage": the exact one is the report, not a merge of both.
		{name: "usage spelled twice", data: `{"created":1.5,"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2},"Usage":{"prompt_tokens_details":{"cached_tokens":4}}}`,
			created: 1, usage: &usage.Tokens{PromptTokens: 5, CompletionTokens: 2}},
		// A field outside the usage of a type the fixes leave (a numeric
		// id, a model as a number) is left out; the usage is still the
		// report, read on its own.
		{name: "a numeric id", data: `{"id":123,"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}}`,
			usage: &usage.Tokens{PromptTokens: 10, CachedTokens: 4, CompletionTokens: 5}},
		{name: "a model as a number", data: `{"model":5,"choices":[{"delta":{"content":"hi"}}],"usage":{"prompt_tokens":1.0,"completion_tokens":2}}`,
			text: "hi", usage: &usage.Tokens{PromptTokens: 1, CompletionTokens: 2}},
		{name: "a numeric id and details of another type", data: `{"id":123,"choices":[],"usage":{"prompt_tokens":10,"prompt_tokens_details":"x"}}`,
			usage: &usage.Tokens{PromptTokens: 10}},
		{name: "a numeric id and usage under two other cases", data: `{"id":1,"choices":[],"Usage":{"prompt_tokens":5},"USAGE":{"prompt_tokens":6}}`, unreadable: true},
		{name: "a numeric id and a fraction", data: `{"id":1,"choices":[],"usage":{"prompt_tokens":10.5,"completion_tokens":2}}`, unreadable: true},
		{name: "a numeric id and usage null", data: `{"id":1,"choices":[],"usage":null}`},
		{name: "a numeric id and a count as an object", data: `{"id":123,"choices":[],"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":{"n":8}}}}`, unreadable: true},
		{name: "a numeric id and usage spelled twice", data: `{"id":1,"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2},"Usage":{"prompt_tokens_details":{"cached_tokens":4}}}`,
			usage: &usage.Tokens{PromptTokens: 5, CompletionTokens: 2}},
		{name: "an unknown member", data: `{"choices":[],"usage":{"prompt_tokens":1.0,"cost":0.25}}`, usage: &usage.Tokens{PromptTokens: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseChunkLenient([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			var text, args string
			if len(c.Choices) > 0 {
				d := c.Choices[0].Delta
				text = d.Content + d.Refusal
				if len(d.ToolCalls) > 0 {
					args = d.ToolCalls[0].Function.Arguments
				}
			}
			if c.Created != tc.created || text != tc.text || args != tc.args || c.UnreadableUsage != tc.unreadable {
				t.Fatalf("created %d, text %q, args %q, unreadable %v; want %d, %q, %q, %v", c.Created, text, args, c.UnreadableUsage,
					tc.created, tc.text, tc.args, tc.unreadable)
			}
			switch {
			case tc.usage == nil && c.Usage != nil && !tc.unreadable:
				t.Fatalf("usage %+v, want none", c.Usage)
			case tc.unreadable && c.Usage != nil:
				t.Fatalf("usage %+v, want none: a count could not be read", c.Usage)
			case tc.usage != nil && (c.Usage == nil || c.Usage.Meter() != *tc.usage):
				t.Fatalf("usage %+v, want %+v", c.Usage, tc.usage)
			}
		})
	}
	for _, data := range []string{`null`, `[]`, `{"a":`, `"x"`} {
		if _, err := ParseChunkLenient([]byte(data)); err == nil {
			t.Errorf("%s: read as a chunk", data)
		}
	}
}

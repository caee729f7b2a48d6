package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// chunkJSON is an OpenAI chunk or error payload as a client reads it.
type chunkJSON struct {
	ID      string  `json:"id"`
	Object  string  `json:"object"`
	Created int64   `json:"created"`
	Model   string  `json:"model"`
	Usage   any     `json:"usage"`
	Error   *apiErr `json:"error"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role             *string `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

type apiErr struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func parseChunks(t *testing.T, payloads [][]byte) []chunkJSON {
	t.Helper()
	out := make([]chunkJSON, len(payloads))
	for i, p := range payloads {
		if !json.Valid(p) {
			t.Fatalf("payload %d is not JSON: %s", i, p)
		}
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out[i]); err != nil {
			t.Fatalf("payload %d: %v: %s", i, err, p)
		}
		c := out[i]
		if c.Usage != nil {
			t.Errorf("payload %d carries usage: %s", i, p)
		}
		if c.Error == nil && (c.ID != "chatcmpl-1" || c.Object != "chat.completion.chunk" || c.Created != 1700000000 ||
			c.Model != "gemini-test" || len(c.Choices) != 1) {
			t.Errorf("payload %d: bad envelope: %s", i, p)
		}
	}
	return out
}

// recordedText returns the text and thought text of a recording's data:
// frames, read independently of the package.
func recordedText(t *testing.T, stream []byte) (text, thought string) {
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "data:")
		if !ok {
			continue
		}
		var resp struct {
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text    string `json:"text"`
						Thought bool   `json:"thought"`
					} `json:"parts"`
				} `json:"content"`
			} `json:"candidates"`
		}
		if err := json.Unmarshal([]byte(line), &resp); err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.Candidates {
			for _, p := range c.Content.Parts {
				if p.Thought {
					thought += p.Text
				} else {
					text += p.Text
				}
			}
		}
	}
	return text, thought
}

// TestStreamFixtures translates every recorded Gemini stream into OpenAI
// chunks: valid JSON, content and reasoning_content exactly the recorded
// text and thoughts, a role chunk first, and the same usage as Tap.
func TestStreamFixtures(t *testing.T) {
	_, recs := geminiFixtures(t)
	for _, rec := range recs {
		t.Run(rec.Name, func(t *testing.T) {
			stream := rec.Raw
			payloads, r := translateStream(t, stream)
			chunks := parseChunks(t, payloads)
			var content, reasoning strings.Builder
			finishes, errs := 0, 0
			for i, c := range chunks {
				if c.Error != nil {
					errs++
					continue
				}
				d := c.Choices[0].Delta
				if (i == 0) != (d.Role != nil) {
					t.Errorf("chunk %d: role %v; want the role in the first chunk only", i, d.Role)
				}
				if d.Content != nil {
					content.WriteString(*d.Content)
				}
				if d.ReasoningContent != nil {
					reasoning.WriteString(*d.ReasoningContent)
				}
				if c.Choices[0].FinishReason != nil {
					finishes++
				}
			}
			text, thought := recordedText(t, stream)
			if content.String() != text {
				t.Errorf("content %q\nwant %q", content.String(), text)
			}
			if reasoning.String() != thought {
				t.Errorf("reasoning_content %q\nwant %q", reasoning.String(), thought)
			}
			if finishes == 0 {
				t.Error("no finish chunk")
			}
			if (errs > 0) != (r.Error != "") || errs > 1 {
				t.Errorf("%d error payloads, report error %q", errs, r.Error)
			}
			tr := tapStream(t, stream)
			if r.Usage != tr.Usage || r.Final != tr.Final || r.Reported != tr.Reported || r.FinishReason != tr.FinishReason ||
				r.Error != tr.Error || r.ServedModel != tr.ServedModel || r.Output.String() != tr.Output.String() {
				t.Errorf("stream report differs from Tap's")
			}
		})
	}
}

func TestStreamToolCalls(t *testing.T) {
	dir, _ := geminiFixtures(t)
	payloads, _ := translateStream(t, readFixture(t, dir, "gemini/gemini3-function-call-thoughts.sse"))
	chunks := parseChunks(t, payloads)
	if len(chunks) != 3 {
		t.Fatalf("%d chunks, want role, tool call, finish: %s", len(chunks), bytes.Join(payloads, []byte("\n")))
	}
	tc := chunks[1].Choices[0].Delta.ToolCalls
	if len(tc) != 1 || tc[0].Index != 0 || tc[0].ID != "call_0" || tc[0].Type != "function" ||
		tc[0].Function.Name != "get_country" || tc[0].Function.Arguments != "{}" {
		t.Errorf("tool call chunk: %s", payloads[1])
	}
	if f := chunks[2].Choices[0].FinishReason; f == nil || *f != "tool_calls" {
		t.Errorf("finish chunk: %s", payloads[2])
	}
}

func TestStreamEvents(t *testing.T) {
	stream := `data: {"candidates":[{"content":{"parts":[{"text":"<a\u0000\"é"},{"functionCall":{"name":"f","args":{"x": [1, 2]}}},{"functionCall":{"name":"g"}}]},"index":0},` +
		`{"content":{"parts":[{"text":"second"}]},"finishReason":"MAX_TOKENS","index":1}]}` + "\n\n" +
		`data: {"candidates":[{"content":{"parts":[]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1}}` + "\n\n" +
		`data: {"error":{"code":499,"message":"The operation was cancelled.","status":"CANCELLED"}}` + "\n\n"
	payloads, r := translateStream(t, []byte(stream))
	got := string(bytes.Join(payloads, []byte("\n")))
	pre := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gemini-test","choices":[{"index":`
	want := strings.Join([]string{
		pre + `0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		pre + `0,"delta":{"content":"<a\u0000\"é"},"finish_reason":null}]}`,
		pre + `0,"delta":{"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"f","arguments":"{\"x\":[1,2]}"}}]},"finish_reason":null}]}`,
		pre + `0,"delta":{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":null}]}`,
		pre + `1,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		pre + `1,"delta":{"content":"second"},"finish_reason":null}]}`,
		pre + `1,"delta":{},"finish_reason":"length"}]}`,
		pre + `0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"error":{"message":"gemini error 499 CANCELLED: The operation was cancelled.","type":"upstream_error","param":null,"code":"CANCELLED"}}`,
	}, "\n")
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	parseChunks(t, payloads)
	if !r.Final || r.FinishReason != "error" || r.Usage.PromptTokens != 1 {
		t.Errorf("report: final %v finish %q usage %+v", r.Final, r.FinishReason, r.Usage)
	}
}

func TestStreamBlockedPrompt(t *testing.T) {
	payloads, r := translateStream(t, []byte(`data: {"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":3}}`+"\n\n"))
	chunks := parseChunks(t, payloads)
	if len(chunks) != 2 || chunks[1].Choices[0].FinishReason == nil || *chunks[1].Choices[0].FinishReason != "content_filter" || !r.Final {
		t.Errorf("blocked prompt: %s", bytes.Join(payloads, []byte("\n")))
	}
}

// TestStreamManyCandidatesIsLinear: an upstream's event of many
// candidates, each of its own index, is translated in time linear in them.
// Each candidate's state was found by a scan of all before it: 100,000
// candidates (3.7 MB, under the SSE reader's cap) held the stream's
// goroutine for tens of seconds per event, bytes still flowing so that no
// stall timeout ended it.
func TestStreamManyCandidatesIsLinear(t *testing.T) {
	const n = 100000
	var b strings.Builder
	b.WriteString(`{"candidates":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"index":` + strconv.Itoa(i) + `,"finishReason":"STOP"}`)
	}
	b.WriteString(`]}`)
	s := Chat{}.NewStream("id", "gemini-x", 1).(*Stream)
	start := time.Now()
	out := s.Event(&sse.Event{Data: []byte(b.String()), HasData: true}, &tap.Report{}, nil)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%d candidates took %v", n, d)
	}
	if len(out) != 2*n {
		t.Fatalf("%d chunks, want %d", len(out), 2*n)
	}
	body, err := Chat{}.Body([]byte(b.String()), "id", "gemini-x", 1, &tap.Report{})
	if d := time.Since(start); err != nil || d > 10*time.Second {
		t.Fatalf("Body: %v after %v", err, d)
	}
	_ = body
}

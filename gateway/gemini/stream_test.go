package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

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
			if finishes != 1 { // one per choice, as OpenAI sends it, however often the upstream repeats it (Vertex)
				t.Errorf("%d finish chunks, want 1", finishes)
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
	if len(tc) != 1 || tc[0].Index != 0 || tc[0].ID != "call_1_0_0" || tc[0].Type != "function" ||
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
		pre + `0,"delta":{"tool_calls":[{"index":0,"id":"call_1_0_0","type":"function","function":{"name":"f","arguments":"{\"x\":[1,2]}"}}]},"finish_reason":null}]}`,
		pre + `0,"delta":{"tool_calls":[{"index":1,"id":"call_1_0_1","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":null}]}`,
		pre + `1,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		pre + `1,"delta":{"content":"second"},"finish_reason":null}]}`,
		pre + `0,"delta":{},"finish_reason":"tool_calls"}]}`,
		pre + `1,"delta":{},"finish_reason":"length"}]}`,
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

// manyCandidates is one Gemini response of n candidates, indexes n-1
// down to 0, each finished.
func manyCandidates(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"candidates":[`)
	for i := n - 1; i >= 0; i-- {
		if i < n-1 {
			b.WriteByte(',')
		}
		b.WriteString(`{"index":` + strconv.Itoa(i) + `,"content":{"parts":[{"text":"t` + strconv.Itoa(i) + `"}]},"finishReason":"STOP"}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestStreamManyCandidates: candidates are found by their index, however
// many there are and in whatever order they come, in a stream and in a
// whole body. Each candidate's state was found by a scan of all before it
// (an upstream's 100,000 candidates held the stream's goroutine for tens
// of seconds; BenchmarkStreamManyCandidates); it is a map now, which this
// holds to the scan's answers: each event's text and finish in the
// candidate's own choice, and its role once (the state kept across events).
func TestStreamManyCandidates(t *testing.T) {
	const n = 3000
	data := manyCandidates(n)
	s := Chat{}.NewStream("id", "gemini-x", 1).(*Stream)
	out := s.Event(&sse.Event{Data: data, HasData: true}, &tap.Report{}, nil)
	out = s.Event(&sse.Event{Data: data, HasData: true}, &tap.Report{}, out) // the same indexes again: the same choices
	out = s.End(&tap.Report{}, out)
	texts, finished, roles := map[int]int{}, map[int]int{}, map[int]int{}
	for _, p := range out {
		var c chunkJSON
		if err := json.Unmarshal(p, &c); err != nil {
			t.Fatalf("%v: %s", err, p)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				if *ch.Delta.Content != "t"+strconv.Itoa(ch.Index) {
					t.Fatalf("choice %d got %q", ch.Index, *ch.Delta.Content)
				}
				texts[ch.Index]++
			}
			if ch.FinishReason != nil {
				finished[ch.Index]++
			}
			if ch.Delta.Role != nil {
				roles[ch.Index]++
			}
		}
	}
	if len(texts) != n || len(finished) != n {
		t.Fatalf("%d choices with text, %d finished; want %d each", len(texts), len(finished), n)
	}
	for i := range n {
		if texts[i] != 2 || finished[i] != 1 || roles[i] != 1 {
			t.Fatalf("choice %d: text %d times, finished %d, role %d; want 2 (one per event), 1 (at the end) and 1 (its state kept)",
				i, texts[i], finished[i], roles[i])
		}
	}
	body, err := Chat{}.Body(data, "id", "gemini-x", 1, &tap.Report{})
	if err != nil {
		t.Fatal(err)
	}
	var whole struct {
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &whole); err != nil || len(whole.Choices) != n {
		t.Fatalf("body: %v, %d choices; want %d", err, len(whole.Choices), n)
	}
	for _, ch := range whole.Choices {
		if ch.Message.Content != "t"+strconv.Itoa(ch.Index) {
			t.Fatalf("body choice %d: %q", ch.Index, ch.Message.Content)
		}
	}
}

// BenchmarkStreamManyCandidates: the time per candidate of one response of
// 1,000 and of 10,000 candidates; linear when the two are alike.
func BenchmarkStreamManyCandidates(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		data := manyCandidates(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				s := Chat{}.NewStream("id", "gemini-x", 1).(*Stream)
				s.Event(&sse.Event{Data: data, HasData: true}, &tap.Report{}, nil)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/candidate")
		})
	}
}

// A candidate's finish chunk carries its last finishReason: Vertex AI puts
// STOP on every chunk, and the last one says how the answer ended.
func TestStreamFinishIsTheLastReason(t *testing.T) {
	payloads, _ := translateStream(t, []byte(`data: {"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"}]}`+"\n\n"+
		`data: {"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"MAX_TOKENS"}]}`+"\n\n"))
	var finishes []string
	for _, c := range parseChunks(t, payloads) {
		if f := c.Choices[0].FinishReason; f != nil {
			finishes = append(finishes, *f)
		}
	}
	if len(finishes) != 1 || finishes[0] != "length" {
		t.Errorf("finish reasons %q, want one: length", finishes)
	}
}

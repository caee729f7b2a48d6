package sim_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// Prompt of chatBody: 3 + 4 + 2 = 9 tokens.
const prompt = 9

func TestFaultDisconnectAfter(t *testing.T) {
	s, srv := start(t)
	// sim-reasoning, 8 tokens: 4 reasoning, 4 content; 2 streamed.
	_, data, err := post(t, srv, chatBody("sim-reasoning", true, true, `,"max_tokens":8`), "X-Sim-Fault", "disconnect_after:2")
	if err == nil {
		t.Error("read succeeded, want an abrupt close")
	}
	p := parseStream(t, data)
	if p.done || p.finish != "" || p.nContent != 2 || len(p.chunks) != 3 {
		t.Fatalf("got %+v", p)
	}
	st := waitStats(t, s, 1)
	want := sim.Usage{PromptTokens: prompt, CompletionTokens: 4 + 2, ReasoningTokens: 4}
	if st.Requests.Disconnected != 1 || st.Usage() != want {
		t.Errorf("stats %+v, want usage %+v", st, want)
	}
}

func TestFaultErrorAfter(t *testing.T) {
	for _, fault := range []string{"error_after:3", "error_after:3,no_done", "error_after:99"} {
		s, srv := start(t)
		resp, data, err := post(t, srv, chatBody("sim-small", true, true, `,"max_tokens":5`), "X-Sim-Fault", fault)
		if err != nil || resp.StatusCode != 200 {
			t.Fatal(fault, resp.StatusCode, err)
		}
		fr := frames(t, data)
		wantContent, wantDone := 3, !strings.Contains(fault, "no_done")
		if fault == "error_after:99" {
			wantContent = 5
		}
		if wantDone != (fr[len(fr)-1] == "[DONE]") {
			t.Fatalf("%s: last frame %q", fault, fr[len(fr)-1])
		}
		if wantDone {
			fr = fr[:len(fr)-1]
		}
		errFrame := fr[len(fr)-1]
		var e struct {
			Error struct {
				Message string
				Type    string
				Code    *string
			}
		}
		if err := json.Unmarshal([]byte(errFrame), &e); err != nil || e.Error.Type != "server_error" ||
			e.Error.Message == "" || !strings.Contains(errFrame, `"code":null`) {
			t.Fatalf("%s: error frame %q", fault, errFrame)
		}
		p := parseStream(t, strings.Join(mapFrames(fr[:len(fr)-1]), ""))
		if p.nContent != wantContent || p.finish != "" {
			t.Errorf("%s: %d content chunks, finish %q", fault, p.nContent, p.finish)
		}
		st := waitStats(t, s, 1)
		want := sim.Usage{PromptTokens: prompt, CompletionTokens: int64(wantContent)}
		if st.Requests.StreamError != 1 || st.Usage() != want {
			t.Errorf("%s: stats %+v, want %+v", fault, st, want)
		}
	}
}

func mapFrames(payloads []string) []string {
	out := make([]string, len(payloads))
	for i, f := range payloads {
		out[i] = "data: " + f + "\n\n"
	}
	return out
}

func TestFaultStall(t *testing.T) {
	s, srv := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, data, err := postCtx(t, ctx, srv, chatBody("sim-pro", true, false, ""), "X-Sim-Fault", "stall")
	if err == nil {
		t.Fatal("stalled stream ended by itself")
	}
	if p := parseStream(t, data); len(p.chunks) != 1 || p.nContent != 0 {
		t.Fatalf("got %q", data)
	}
	st := waitStats(t, s, 1)
	// sim-pro, 16 tokens: 8 reasoning billed, no content.
	want := sim.Usage{PromptTokens: prompt, CachedTokens: prompt / 2, CompletionTokens: 8, ReasoningTokens: 8}
	if st.Requests.Stalled != 1 || st.Usage() != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
}

func TestFaultStallBefore(t *testing.T) {
	for _, stream := range []bool{true, false} {
		s, srv := start(t)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(chatBody("sim-small", stream, false, `,"metadata":{"sim_fault":"stall_before"}`)))
		if resp, err := srv.Client().Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("stream %v: got status %d, want no response", stream, resp.StatusCode)
		}
		cancel()
		if st := waitStats(t, s, 1); st.Requests.Stalled != 1 || st.Usage() != (sim.Usage{}) {
			t.Errorf("stream %v: stats %+v", stream, st)
		}
	}
}

func TestFaultUsageModes(t *testing.T) {
	full := sim.Usage{PromptTokens: prompt, CompletionTokens: 3}
	for _, tc := range []struct {
		fault        string
		includeUsage bool
		// usage per chunk (role, 3 content, finish[, usage chunk]): "-" absent, "null", or completion tokens
		want string
		done bool
	}{
		{"no_usage", true, "- - - - -", true},
		{"usage_in_finish", false, "- - - - 3", true},
		{"usage_in_finish", true, "null null null null 3", true},
		{"cumulative_usage", false, "0 1 2 3 3", true},
		{"cumulative_usage", true, "0 1 2 3 3 3", true},
		{"no_done", true, "null null null null null 3", false},
		{"no_done,usage_in_finish", false, "- - - - 3", false},
	} {
		s, srv := start(t)
		_, data, _ := post(t, srv, chatBody("sim-small", true, tc.includeUsage, `,"max_tokens":3`), "X-Sim-Fault", tc.fault)
		p := parseStream(t, data)
		var got []string
		for _, c := range p.chunks {
			switch raw, ok := c.Raw["usage"]; {
			case !ok:
				got = append(got, "-")
			case string(raw) == "null":
				got = append(got, "null")
			default:
				u := c.Usage.usage(t)
				if u.PromptTokens != prompt {
					t.Errorf("%s: prompt %d", tc.fault, u.PromptTokens)
				}
				got = append(got, strconv.FormatInt(u.CompletionTokens, 10))
			}
		}
		if strings.Join(got, " ") != tc.want || p.done != tc.done || p.nContent != 3 || p.finish != "length" {
			t.Errorf("%s include_usage=%v: usage %q done %v, want %q done %v", tc.fault, tc.includeUsage, got, p.done, tc.want, tc.done)
		}
		if st := waitStats(t, s, 1); st.Requests.OK != 1 || st.Usage() != full {
			t.Errorf("%s: stats %+v", tc.fault, st)
		}
	}
}

func TestCanceledMidStream(t *testing.T) {
	t.Parallel()
	s, srv := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(chatBody("sim-small", true, false, `,"max_tokens":5`)))
	req.Header.Set("X-Sim-Delay-Ms", "1000")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	for strings.Count(string(buf), "\n\n") < 2 { // role and one content chunk
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	resp.Body.Close()
	st := waitStats(t, s, 1)
	if want := (sim.Usage{PromptTokens: prompt, CompletionTokens: 1}); st.Requests.Canceled != 1 || st.Usage() != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
}

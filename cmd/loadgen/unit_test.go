package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as loadgen's proxy child, as the
// loadgen binary does when it re-executes itself.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "proxy" {
		args := os.Args[1:]
		if len(args) > 0 && args[0] == "proxy" {
			args = args[1:]
		}
		if err := proxyMain(args); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen proxy:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRatios(t *testing.T) {
	if got := addedMs(3500*time.Microsecond, 3*time.Millisecond); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("addedMs = %v, want 0.5", got)
	}
	if got := ratio(13, 10); math.Abs(got-1.3) > 1e-12 {
		t.Errorf("ratio = %v", got)
	}
	if !math.IsNaN(ratio(1, 0)) || f(ratio(1, 0), 2) != "n/a" {
		t.Error("ratio over 0 must be n/a")
	}
	// 2.5 CPU seconds over 500,000 chunks is 5 s per million.
	if got := perMillion(2.5, 500000); math.Abs(got-5) > 1e-12 {
		t.Errorf("perMillion = %v", got)
	}
	if !math.IsNaN(perMillion(1, 0)) {
		t.Error("perMillion of no chunks must be NaN")
	}

	mk := func(target string, ttft50, ttft99 time.Duration, cpu float64, chunks int64) *window {
		w := newWindow(target, 1)
		w.elapsed = time.Second
		w.reqs, w.ok, w.chunks = 10, 10, chunks
		// Half the requests at the p50 value, the rest at the p99 value:
		// p50 is the 50th of 100 samples.
		for i := range 100 {
			if i < 50 {
				w.ttft.record(ttft50)
			} else {
				w.ttft.record(ttft99)
			}
		}
		w.cpu[target] = cpu
		return w
	}
	ss := []summary{
		summarize(mk("proxy", 2*time.Millisecond, 10*time.Millisecond, 1.0, 1000000)),
		summarize(mk("tollgate", 2300*time.Microsecond, 11*time.Millisecond, 1.2, 1000000)),
	}
	withRatios(ss)
	tg := ss[1]
	if math.Abs(tg.addedP50-0.3) > 0.02 || math.Abs(tg.addedP99-1.0) > 0.05 {
		t.Errorf("added TTFT p50 %.3f p99 %.3f, want 0.3 and 1.0", tg.addedP50, tg.addedP99)
	}
	if math.Abs(tg.cpuRatio-1.2) > 1e-9 || math.Abs(tg.cpuPerM-1.2) > 1e-9 {
		t.Errorf("cpu ratio %v per M %v, want 1.2 and 1.2", tg.cpuRatio, tg.cpuPerM)
	}
	if ss[0].cpuRatio != 1 || ss[0].addedP50 != 0 {
		t.Errorf("the proxy against itself: %+v", ss[0])
	}
}

// sseServer streams an OpenAI-shaped answer: the role chunk at once, n
// content chunks each after delay, the finish and usage chunks and
// [DONE] (unless noDone); eol is the line ending.
func sseServer(t *testing.T, n int, delay time.Duration, eol string, noDone bool, extra string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(s string) {
			fmt.Fprintf(w, "data: %s%s%s", s, eol, eol)
			fl.Flush()
		}
		send(`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}],"usage":null}`)
		for range n {
			time.Sleep(delay)
			send(`{"id":"x","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}],"usage":null}`)
		}
		if extra != "" {
			send(extra)
		}
		send(`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":null}`)
		send(`{"id":"x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`)
		if !noDone {
			send("[DONE]")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStreamTiming(t *testing.T) {
	const delay = 30 * time.Millisecond
	srv := sseServer(t, 5, delay, "\n", false, "")
	s := &streamer{client: newClient(1, 10*time.Second), url: srv.URL, key: "k",
		body: requestBody("sim-small", true, 5, 3, 0), stream: true, want: 5}
	gaps := newHist()
	for i := range 2 { // the second request reuses the connection and buffer
		gaps.reset()
		r := s.do(context.Background(), gaps)
		if r.err != "" || r.status != 200 || r.chunks != 5 {
			t.Fatalf("request %d: %+v", i, r)
		}
		// The role chunk does not count: the first token comes after one
		// delay. (The upper bounds leave room for a loaded machine.)
		if r.ttft < delay || r.ttft > delay+200*time.Millisecond {
			t.Errorf("request %d: TTFT %v, want about %v", i, r.ttft, delay)
		}
		if gaps.count() != 4 {
			t.Fatalf("request %d: %d gaps, want 4", i, gaps.count())
		}
		if g := gaps.quantile(.5); g < delay-2*time.Millisecond || g > delay+200*time.Millisecond {
			t.Errorf("request %d: gap p50 %v, want about %v", i, g, delay)
		}
	}
}

func TestStreamErrors(t *testing.T) {
	body := requestBody("sim-small", true, 3, 3, 0)
	for _, c := range []struct {
		name string
		srv  *httptest.Server
		key  string
		want int
		err  string
	}{
		{"CRLF line endings", sseServer(t, 3, 0, "\r\n", false, ""), "k", 3, ""},
		{"no [DONE]", sseServer(t, 3, 0, "\n", true, ""), "k", 3, errNoDone},
		{"too few chunks", sseServer(t, 2, 0, "\n", false, ""), "k", 3, "2 content chunks, want 3"},
		{"error frame", sseServer(t, 3, 0, "\n", false, `{"error":{"message":"boom","type":"server_error"}}`), "k", 3, errErrorFrame},
		{"HTTP status", sseServer(t, 3, 0, "\n", false, ""), "wrong", 3, "HTTP 401"},
		{"a line longer than the buffer", sseServer(t, 3, 0, "\n", false,
			`{"id":"x","choices":[{"index":0,"delta":{"content":"`+strings.Repeat("a", 40000)+`"}}]}`), "k", 4, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &streamer{client: newClient(1, 10*time.Second), url: c.srv.URL, key: c.key, body: body, stream: true, want: c.want}
			r := s.do(context.Background(), nil)
			if r.err != c.err {
				t.Errorf("err = %q, want %q (%+v)", r.err, c.err, r)
			}
		})
	}
	s := &streamer{client: newClient(1, time.Second), url: "http://127.0.0.1:1/x", body: body, stream: true}
	if r := s.do(context.Background(), nil); r.err != "request: connection refused" {
		t.Errorf("closed port: err = %q", r.err)
	}
}

func TestIsContent(t *testing.T) {
	for in, want := range map[string]bool{
		`{"choices":[{"delta":{"role":"assistant","content":"","refusal":null}}]}`: false,
		`{"choices":[{"delta":{"content":"tok "}}]}`:                               true,
		`{"choices":[],"usage":{"prompt_tokens":9}}`:                               false,
		`{"choices":[{"delta":{},"finish_reason":"stop"}]}`:                        false,
		`{"x":"content":"`: false,
	} {
		if got := isContent([]byte(in)); got != want {
			t.Errorf("isContent(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-mode", "short"}, os.Stderr)
	if err != nil || c.chunks != 10 || strings.Join(c.targets, ",") != "sim,proxy,tollgate" {
		t.Errorf("short: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-mode", "short", "-chunks", "7", "-targets", "tollgate,proxy,tollgate"}, os.Stderr)
	if err != nil || c.chunks != 7 || strings.Join(c.targets, ",") != "tollgate,proxy" {
		t.Errorf("short with chunks: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-mode", "idle"}, os.Stderr)
	if err != nil || strings.Join(c.targets, ",") != "proxy,tollgate" || c.streams != 10000 {
		t.Errorf("idle: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-targets", "proxy,tollgate,tollgate-h2c,tollgate-base,tollgate-split", "-base-tollgate-bin", "/x/tollgate"}, os.Stderr)
	if err != nil || strings.Join(c.targets, ",") != "proxy,tollgate,tollgate-h2c,tollgate-base,tollgate-split" || c.baseTollgateBin != "/x/tollgate" {
		t.Errorf("tollgate targets: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-mode", "idle", "-memory-limit", "450MiB"}, os.Stderr)
	if err != nil || c.memoryLimit != "450MiB" {
		t.Errorf("memory limit: %+v, %v", c, err)
	}
	st := &stack{memoryLimit: "450MiB"}
	if env := st.withMemoryLimit([]string{"A=1", "GOMEMLIMIT=1GiB"}); strings.Join(env, " ") != "A=1 GOMEMLIMIT=450MiB" {
		t.Errorf("withMemoryLimit: %v", env)
	}
	c, err = parseFlags([]string{"-mode", "idle", "-memory-cgroup", "477MiB"}, os.Stderr)
	if err != nil || c.memoryCgroup != 477<<20 {
		t.Errorf("memory cgroup: %+v, %v", c, err)
	}
	for in, want := range map[string]int64{"1": 1, "512B": 512, "2KiB": 2048, "477MiB": 477 << 20, "3GiB": 3 << 30, "1TiB": 1 << 40} {
		if got, ok := parseMemorySize(in); !ok || got != want {
			t.Errorf("parseMemorySize(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, bad := range [][]string{{"-mode", "meter"}, {"-targets", "nginx"}, {"-concurrency", "0"}, {"-targets", "tollgate-base"},
		{"-memory-limit", "450M"}, {"-memory-limit", "MiB"}, {"-memory-limit", "-1"}, {"-memory-limit", "0"},
		{"-memory-cgroup", "477M"}, {"-memory-cgroup", "9000000TiB"}, {"-mode", "keys", "-memory-cgroup", "1GiB"},
		{"-cpu-profile-dir", "p", "-mode", "idle"}, {"-cpu-profile-dir", "p", "-requests", "100"}, {"-cpu-profile-dir", "p", "-targets", "proxy,tollgate-base", "-base-tollgate-bin", "/x"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestCgroupCounters(t *testing.T) {
	events := "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n"
	if statValue(events, "max") != 12 || statValue(events, "oom_kill") != 1 || statValue(events, "oom_group_kill") != 0 || statValue(events, "none") != 0 {
		t.Errorf("statValue on memory.events: max %d, oom_kill %d", statValue(events, "max"), statValue(events, "oom_kill"))
	}
	for _, c := range []struct{ path, root, want string }{
		{"/process_api/abc", "/", "/process_api/abc"},
		{"/kubepods/pod1/c1", "/kubepods/pod1/c1", ""},
		{"/kubepods/pod1/c1/x", "/kubepods/pod1/c1", "/x"},
	} {
		if got := relCgroup(c.path, c.root); got != c.want {
			t.Errorf("relCgroup(%q, %q) = %q, want %q", c.path, c.root, got, c.want)
		}
	}
}

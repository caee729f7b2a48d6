package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// TestServesH1AndH2C: the command serves HTTP/1.1 and cleartext HTTP/2
// with prior knowledge on one port, and /stats counts the requests that
// came over HTTP/2.
func TestServesH1AndH2C(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-listen", addr}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	base := "http://" + addr
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	clients := map[int]*http.Client{1: {}, 2: {Transport: &http.Transport{Protocols: &h2}}}
	const body = `{"model":"sim-small","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(base + "/v1/models"); err == nil {
			resp.Body.Close()
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	for _, major := range []int{1, 2, 2} {
		resp, err := clients[major].Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("HTTP/%d: %v", major, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != major || !strings.Contains(string(b), "data: [DONE]") {
			t.Fatalf("HTTP/%d client: %d over HTTP/%d:\n%s", major, resp.StatusCode, resp.ProtoMajor, b)
		}
	}
	resp, err := http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st sim.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.HTTP2Requests != 2 || st.Requests.OK != 3 {
		t.Fatalf("stats: %d requests over HTTP/2 of %d ok, want 2 of 3", st.HTTP2Requests, st.Requests.OK)
	}
}

// TestHelpExitsCleanly: -h (and -help) prints the usage on stderr and
// returns nil, so the command exits 0 without serving, as tollgate's
// --help does, rather than exit 1 after "upstream-sim: flag: help
// requested". The usage names where the simulator's rules and fault knobs
// are described.
func TestHelpExitsCleanly(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		out, err := captureStderr(t, func() error { return run(context.Background(), []string{arg}) })
		if err != nil {
			t.Errorf("run(%s) = %v, want nil", arg, err)
		}
		if !strings.Contains(out, "-listen") || !strings.Contains(out, "cmd/upstream-sim/sim") {
			t.Errorf("run(%s) printed %q, want the flags and where the fault knobs are described", arg, out)
		}
	}
}

// captureStderr runs f with os.Stderr sent to a file and returns what f
// wrote there.
func captureStderr(t *testing.T, f func() error) (string, error) {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	saved := os.Stderr
	os.Stderr = tmp
	ferr := f()
	os.Stderr = saved
	b, err := os.ReadFile(tmp.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b), ferr
}

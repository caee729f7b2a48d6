package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCPUProfilerSavesTheTargetsProfile: the profiler GETs a window's
// whole seconds of net/http/pprof's CPU profile and saves it under a name
// that tells the load and the round; a target without TOLLGATE_PPROF (404)
// is an error that says so.
func TestCPUProfilerSavesTheTargetsProfile(t *testing.T) {
	mux := http.NewServeMux()
	var asked string
	mux.HandleFunc("/debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.RawQuery
		pprof.Profile(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	dir := filepath.Join(t.TempDir(), "profiles")
	p, err := newCPUProfiler(dir, &config{mode: "short", concurrency: 100, chunks: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.start(context.Background(), srv.URL, 2, 1500*time.Millisecond)(); err != nil {
		t.Fatal(err)
	}
	if asked != "seconds=1" {
		t.Errorf("asked for %q, want seconds=1 (the window's whole seconds)", asked)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tollgate-short-c100-n10-d0-r2.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	// A pprof profile is a gzipped protocol buffer.
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the saved profile is not gzipped: %v", err)
	}
	if raw, err := io.ReadAll(zr); err != nil || len(raw) == 0 {
		t.Fatalf("the saved profile: %d bytes, %v", len(raw), err)
	}

	err = p.start(context.Background(), srv.URL+"/nothing", 3, time.Second)()
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "TOLLGATE_PPROF") {
		t.Errorf("a target without profiles: %v, want a 404 naming TOLLGATE_PPROF", err)
	}
	if p, err := newCPUProfiler("", &config{}); p != nil || err != nil {
		t.Errorf("no directory: %v, %v; want no profiler", p, err)
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// cpuProfiler saves a CPU profile of the tollgate target over each of its
// windows: net/http/pprof's /debug/pprof/profile on its admin listener,
// which the target serves with TOLLGATE_PPROF=1. `make pgo` merges them
// into cmd/tollgate/default.pgo, the profile go build optimises tollgate
// with (profile-guided optimisation).
type cpuProfiler struct {
	dir   string // where the profiles go, one file a window
	label string // the load, in each file's name
}

// newCPUProfiler returns the profiler of -cpu-profile-dir dir for the load
// of cfg, or nil when dir is empty. It creates dir.
func newCPUProfiler(dir string, cfg *config) (*cpuProfiler, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("-cpu-profile-dir: %w", err)
	}
	return &cpuProfiler{dir: dir, label: fmt.Sprintf("%s-c%d-n%d-d%d", cfg.mode, cfg.concurrency, cfg.chunks, cfg.chunkDelayMs)}, nil
}

// start begins a CPU profile of d (whole seconds, at least 1) of the
// target whose admin listener is adminURL, for round; the returned wait
// blocks until it is saved, and returns why it was not.
func (p *cpuProfiler) start(ctx context.Context, adminURL string, round int, d time.Duration) (wait func() error) {
	secs := max(1, int(d/time.Second))
	path := filepath.Join(p.dir, fmt.Sprintf("tollgate-%s-r%d.pprof", p.label, round))
	done := make(chan error, 1)
	go func() {
		done <- saveProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", adminURL, secs), path)
	}()
	return func() error { return <-done }
}

// saveProfile writes the body of a GET of url to path.
func saveProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("cpu profile: %s: %s (is TOLLGATE_PPROF=1 set for the target?)", resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return f.Close()
}

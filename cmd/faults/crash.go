package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// minStreams is how many streams must be in flight upstream when
// killMidStream kills the gateway.
const minStreams = 50

// killMidStream kill -9s the gateway three times, at a quarter, a half and
// most of the phase's requests. Each time it waits until at least
// minStreams streams are in flight upstream, then reads a stream of its
// own to its [DONE] and kills the gateway the moment it has. It restarts
// the gateway at once on the same data directory each time: it records the
// requests it had in flight from its crash journal, as crashed, with their
// usage estimated; the stream read to [DONE] was durable before [DONE], so
// its X-Request-Id must be in the ledger (measure looks for rw.probes).
func killMidStream(ctx context.Context, s *stack, r *run, rw *row) error {
	watch := s.watchStreams(ctx)
	defer watch.stop()
	rw.inflight = 0 // summed over the kills below
	var at []string
	for i, share := range []float64{0.25, 0.55, 0.85} {
		for r.sent.Load() < int64(share*float64(r.n)) && !isDone(r.done) {
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := s.awaitStreams(ctx, minStreams, 5*time.Second); err != nil {
			return fmt.Errorf("kill %d: %w", i+1, err)
		}
		streams, clients, err := s.probeToDone(ctx, rw, watch)
		if err != nil {
			return fmt.Errorf("kill %d: %w", i+1, err)
		}
		if err := s.startGateway(ctx); err != nil {
			return fmt.Errorf("kill %d: %w", i+1, err)
		}
		if streams < minStreams {
			return fmt.Errorf("kill %d: only %d streams in flight upstream at the kill", i+1, streams)
		}
		rw.inflight += streams
		at = append(at, fmt.Sprintf("%d (%d clients)", streams, clients))
	}
	rw.note = "kill -9 the moment a client read [DONE], with " + strings.Join(at, ", ") +
		" streams in flight upstream; the gateway restarted at once each time"
	return nil
}

// awaitStreams waits until upstream-sim serves at least n requests at once
// and returns how many it serves then.
func (s *stack) awaitStreams(ctx context.Context, n int64, timeout time.Duration) (int64, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := s.simStats(ctx)
		if err == nil && st.Requests.InFlight >= n {
			return st.Requests.InFlight, nil
		}
		if time.Now().After(deadline) {
			return st.Requests.InFlight, fmt.Errorf("fewer than %d streams in flight upstream after %s (%d; %v)", n, timeout, st.Requests.InFlight, err)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// streamWatch samples upstream-sim's requests in flight every 10ms, so
// that a kill can say how many it cut without a query in its way.
type streamWatch struct {
	last atomic.Int64
	stop func()
}

func (s *stack) watchStreams(ctx context.Context) *streamWatch {
	w := &streamWatch{}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if st, err := s.simStats(ctx); err == nil {
				w.last.Store(st.Requests.InFlight)
			}
			_ = sleep(ctx, 10*time.Millisecond)
		}
	}()
	w.stop = func() { cancel(); <-done }
	return w
}

// probeToDone sends a streamed chat completion, reads it up to its
// "data: [DONE]" line and kill -9s the gateway right then (the gateway is
// dead when it returns). It records the stream's X-Request-Id in
// rw.probes and returns how many streams were in flight upstream (the
// watch's last sample, at most 10ms old) and load requests at their
// clients at the kill.
func (s *stack) probeToDone(ctx context.Context, rw *row, watch *streamWatch) (streams, clients int64, err error) {
	body, _ := json.Marshal(map[string]any{"model": "sim-pro", "max_tokens": 16, "stream": true,
		"stream_options": map[string]bool{"include_usage": true},
		"messages":       []map[string]string{{"role": "user", "content": "read me to the end"}},
		"metadata":       map[string]string{"sim_chunks": "4", "sim_delay_ms": "15"}})
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.loader.url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("probe: %s", resp.Status)
	}
	id := resp.Header.Get("X-Request-Id")
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return 0, 0, fmt.Errorf("probe %s: the stream broke before [DONE]: %w", id, err)
		}
		if line == "data: [DONE]\n" {
			break
		}
	}
	streams, clients = watch.last.Load(), s.loader.inflight.Load()
	s.gw.kill9()
	rw.probes = append(rw.probes, id)
	return streams, clients, nil
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// kind is a kind of request in the load mix.
type kind int

const (
	kStream       kind = iota // streamed, include_usage
	kStreamBare               // streamed, no include_usage
	kUnary                    // not streamed
	kCancel                   // the client hangs up mid-stream; the gateway drains the upstream
	kError                    // the upstream ends the stream with an error frame carrying its usage
	kStall                    // the upstream stalls after its opening chunk (cumulative usage); cut off after 1s
	kUpDisconnect             // the upstream drops the connection mid-stream (cumulative usage)
	kStatus                   // the upstream answers 429/500/503 before streaming
)

// Mixes, as weights per kind.
var (
	fullMix   = mix{kStream: 30, kStreamBare: 10, kUnary: 15, kCancel: 10, kError: 10, kStall: 3, kUpDisconnect: 10, kStatus: 5}
	errorMix  = mix{kError: 40, kStall: 15, kUpDisconnect: 30, kStatus: 15}
	cancelMix = mix{kCancel: 100}
	steadyMix = mix{kStream: 45, kStreamBare: 10, kUnary: 20, kCancel: 10, kError: 5, kStall: 1, kUpDisconnect: 5, kStatus: 4}
)

type mix map[kind]int

// pick draws a kind with the mix's weights.
func (m mix) pick(r *rand.Rand) kind {
	total := 0
	for _, w := range m {
		total += w
	}
	n := r.IntN(total)
	for k := kStream; k <= kStatus; k++ {
		if n < m[k] {
			return k
		}
		n -= m[k]
	}
	return kStream
}

// loader sends chat completions through the gateway.
type loader struct {
	url, key string
	client   *http.Client
	seq      atomic.Int64 // requests ever sent: seeds each request's randomness
	inflight atomic.Int64 // requests whose client has not finished
}

func newLoader(gwAddr, key string, conc int) *loader {
	return &loader{url: "http://" + gwAddr + "/v1/chat/completions", key: key,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc + 8}}}
}

// run is one batch of load: started by loader.start, stopped early by stop.
type run struct {
	sent, failed atomic.Int64 // failed: no HTTP response, or a broken body outside kCancel
	stopc        chan struct{}
	stopOnce     sync.Once
	done         chan struct{}
	mu           sync.Mutex
	status       map[int]int
}

func (r *run) stop() { r.stopOnce.Do(func() { close(r.stopc) }) }

// start sends n requests (n < 0: until stopped) paced at rate per second,
// at most conc at once, kinds drawn from m. done closes once every request
// sent has finished at the client.
func (l *loader) start(n int, rate float64, conc int, m mix) *run {
	r := &run{stopc: make(chan struct{}), done: make(chan struct{}), status: map[int]int{}}
	go func() {
		defer close(r.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		sem := make(chan struct{}, conc)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := 0; n < 0 || i < n; i++ {
			select {
			case <-r.stopc:
				return
			case <-tick.C:
			}
			select {
			case <-r.stopc:
				return
			case sem <- struct{}{}:
			}
			seq := l.seq.Add(1)
			rnd := rand.New(rand.NewPCG(uint64(seq), 0x7011))
			k := m.pick(rnd)
			r.sent.Add(1)
			l.inflight.Add(1)
			wg.Add(1)
			go func() {
				defer func() { <-sem; l.inflight.Add(-1); wg.Done() }()
				code, err := l.do(k, rnd)
				r.mu.Lock()
				r.status[code]++
				r.mu.Unlock()
				if err != nil {
					r.failed.Add(1)
				}
			}()
		}
	}()
	return r
}

// do sends one request of kind k and reads its answer: the whole body, or
// for kCancel a few content chunks before hanging up.
func (l *loader) do(k kind, r *rand.Rand) (int, error) {
	model := []string{"sim-pro", "sim-small"}[r.IntN(2)]
	chunks := 1 + r.IntN(8)
	// 10-50ms per chunk: a stream lasts 50-400ms, so faults find requests in flight.
	md := map[string]string{"sim_chunks": strconv.Itoa(chunks), "sim_delay_ms": strconv.Itoa(10 + r.IntN(41))}
	body := map[string]any{"model": model, "max_tokens": 4 + r.IntN(37),
		"messages": []map[string]string{{"role": "user", "content": strings.Repeat("word ", 1+r.IntN(30))}}}
	stream, include, hangUpAfter := true, r.IntN(2) == 0, 0
	switch k {
	case kStream:
		include = true
	case kStreamBare:
		include = false
	case kUnary:
		stream = false
	case kCancel:
		md["sim_delay_ms"], md["sim_chunks"] = "15", "8"
		body["max_tokens"] = 16 + r.IntN(16)
		hangUpAfter = 1 + r.IntN(3)
	case kError:
		md["sim_fault"] = fmt.Sprintf("error_after:%d,usage_in_error", r.IntN(chunks+1))
	case kStall:
		md["sim_fault"] = "stall,cumulative_usage"
	case kUpDisconnect:
		md["sim_fault"] = fmt.Sprintf("disconnect_after:%d,cumulative_usage", r.IntN(chunks+1))
	case kStatus:
		md["sim_status"] = []string{"429", "500", "503"}[r.IntN(3)]
	}
	body["stream"], body["metadata"] = stream, md
	if stream && include {
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+l.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if hangUpAfter == 0 || resp.StatusCode != http.StatusOK {
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	// Hang up after hangUpAfter content chunks (the role chunk first).
	br := bufio.NewReader(resp.Body)
	for frames := 0; frames <= hangUpAfter; {
		line, err := br.ReadString('\n')
		if err != nil {
			return resp.StatusCode, err
		}
		if strings.HasPrefix(line, "data: ") {
			frames++
		}
	}
	cancel()
	return resp.StatusCode, nil
}

// statusSummary renders a run's answers, as "200:412 429:8 ...".
func (r *run) statusSummary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for code := 0; code < 600; code++ {
		if n := r.status[code]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d:%d", code, n))
		}
	}
	return strings.Join(parts, " ")
}

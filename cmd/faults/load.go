package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
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
	kLong                     // a long paced stream: 8-16 chunks, 60-120ms apart (kill phases)
	kDeployed                 // model "smart", of two deployments (streamed or not)
	numKinds
)

// Mixes, as weights per kind.
var (
	fullMix   = mix{kStream: 30, kStreamBare: 10, kUnary: 15, kCancel: 10, kError: 10, kStall: 3, kUpDisconnect: 10, kStatus: 5}
	errorMix  = mix{kError: 40, kStall: 15, kUpDisconnect: 30, kStatus: 15}
	cancelMix = mix{kCancel: 100}
	steadyMix = mix{kStream: 45, kStreamBare: 10, kUnary: 20, kCancel: 10, kError: 5, kStall: 1, kUpDisconnect: 5, kStatus: 4}
	// crashMix keeps many streams in flight for a kill -9 of the gateway,
	// with some of every other kind around them.
	// deployMix sends everything to the model of two deployments.
	deployMix = mix{kDeployed: 100}
	crashMix  = mix{kLong: 80, kStream: 4, kUnary: 3, kCancel: 4, kError: 3, kStall: 1, kUpDisconnect: 3, kStatus: 2}
)

type mix map[kind]int

// pick draws a kind with the mix's weights.
func (m mix) pick(r *rand.Rand) kind {
	total := 0
	for _, w := range m {
		total += w
	}
	n := r.IntN(total)
	for k := kStream; k < numKinds; k++ {
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
	n            int          // requests to send (< 0: until stopped)
	sent, failed atomic.Int64 // failed: no HTTP response, or a broken body outside kCancel
	stopc        chan struct{}
	stopOnce     sync.Once
	done         chan struct{}
	mu           sync.Mutex
	status       map[int]int
	// completed holds the X-Request-Id of every request whose client got
	// a complete answer: a stream that ended in [DONE], or a whole 200 body.
	completed []string
	// expected is, by X-Request-Id, the usage upstream-sim's rules give
	// each request answered with one (what it bills a request that ends
	// well; one cut short bills its prompt and reasoning in full).
	expected map[string]sim.Usage
}

func (r *run) stop() { r.stopOnce.Do(func() { close(r.stopc) }) }

// start sends n requests (n < 0: until stopped) paced at rate per second,
// at most conc at once, kinds drawn from m. done closes once every request
// sent has finished at the client.
func (l *loader) start(n int, rate float64, conc int, m mix) *run {
	r := &run{n: n, stopc: make(chan struct{}), done: make(chan struct{}), status: map[int]int{}, expected: map[string]sim.Usage{}}
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
				a, err := l.do(k, rnd)
				r.mu.Lock()
				r.status[a.code]++
				if a.complete {
					r.completed = append(r.completed, a.id)
				}
				if a.id != "" {
					r.expected[a.id] = a.want
				}
				r.mu.Unlock()
				if err != nil {
					r.failed.Add(1)
				}
			}()
		}
	}()
	return r
}

// answer is what the client of one request got.
type answer struct {
	code     int
	id       string    // X-Request-Id
	complete bool      // a stream that ended in [DONE], or a whole 200 body
	want     sim.Usage // the usage upstream-sim's rules give the request
}

// do sends one request of kind k and reads its answer: the whole body, or
// for kCancel a few content chunks before hanging up.
func (l *loader) do(k kind, r *rand.Rand) (a answer, err error) {
	b, stream, hangUpAfter := requestBody(k, r)
	a.want, _ = sim.ExpectedUsage(b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+l.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	a.code, a.id = resp.StatusCode, resp.Header.Get("X-Request-Id")
	if hangUpAfter == 0 || resp.StatusCode != http.StatusOK {
		var t tail
		_, err = io.Copy(&t, resp.Body)
		a.complete = err == nil && resp.StatusCode == http.StatusOK && (!stream || t.done())
		return a, err
	}
	// Hang up after hangUpAfter content chunks (the role chunk first).
	br := bufio.NewReader(resp.Body)
	for frames := 0; frames <= hangUpAfter; {
		line, err := br.ReadString('\n')
		if err != nil {
			return a, err
		}
		if strings.HasPrefix(line, "data: ") {
			frames++
		}
	}
	cancel()
	return a, nil
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

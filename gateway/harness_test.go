package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/anthropic"
	"github.com/tollgate-dev/tollgate/gateway/gemini"
	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// The gateway tested alone: its sink, journal and key lookup are these
// in-memory implementations of its own interfaces, and its upstream is
// upstream-sim, in-process.

const (
	testKey      = "tg-test-key"
	testCustomer = "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff"
	testKeyID    = "0197a3c2-9999-7888-8777-666655554444"
)

// keys knows testKey, and any key set in extra.
type keys struct{ extra map[string]usage.KeyState }

func (k keys) LookupKey(secret string) (usage.KeyState, bool) {
	if s, ok := k.extra[secret]; ok {
		return s, true
	}
	if secret == testKey {
		return usage.KeyState{CustomerID: testCustomer, KeyID: testKeyID}, true
	}
	return usage.KeyState{}, false
}

// memSink keeps published events; hold, when set, blocks Publish until it
// is closed, and called reports each call first.
type memSink struct {
	mu       sync.Mutex
	events   []usage.Event
	hold     chan struct{}
	holdOnce sync.Once
	called   chan string
	fail     error
}

// holdEvents makes Publish wait until release, and report each call on
// called; the test's end releases it.
func (m *memSink) holdEvents(t *testing.T) {
	m.hold, m.called = make(chan struct{}), make(chan string, 16)
	t.Cleanup(m.release)
}

func (m *memSink) release() { m.holdOnce.Do(func() { close(m.hold) }) }

func (m *memSink) Publish(_ context.Context, e *usage.Event) error {
	if m.called != nil {
		m.called <- e.ID
	}
	if m.hold != nil {
		<-m.hold
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.events = append(m.events, *e)
	return nil
}

// event waits for the event of request id.
func (m *memSink) event(t *testing.T, id string) usage.Event {
	t.Helper()
	return m.eventWhere(t, "request "+id, func(e *usage.Event) bool { return e.ID == id })
}

// eventWhere waits up to 10 seconds for the first event match takes; what
// names it in the failure.
func (m *memSink) eventWhere(t *testing.T, what string, match func(*usage.Event) bool) usage.Event {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		m.mu.Lock()
		for i := range m.events {
			if match(&m.events[i]) {
				e := m.events[i]
				m.mu.Unlock()
				return e
			}
		}
		m.mu.Unlock()
	}
	t.Fatalf("no event for %s", what)
	return usage.Event{}
}

// setFail makes Publish refuse every event with err (nil: take them).
func (m *memSink) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

func (m *memSink) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.events)
}

// memJournal records the calls the gateway makes, in order.
type memJournal struct {
	mu        sync.Mutex
	calls     []string // "begin id", "checkpoint id output", "end id", "fail id"
	hidden    map[string]int64
	spend     []byte            // the last spend charges journaled
	reasoning map[string]int64  // by request id, at Begin
	begunWith map[string]string // corrections by request id, at Begin
	failing   error             // what Failing returns (gateway.JournalHealth)
}

func (j *memJournal) Failing() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failing
}

func (j *memJournal) setFailing(err error) {
	j.mu.Lock()
	j.failing = err
	j.mu.Unlock()
}

func (j *memJournal) add(s string) {
	j.mu.Lock()
	j.calls = append(j.calls, s)
	j.mu.Unlock()
}
func (j *memJournal) Begin(e *usage.Event, _ []byte) {
	j.add("begin " + e.ID)
	j.mu.Lock()
	if j.reasoning == nil {
		j.reasoning = map[string]int64{}
	}
	j.reasoning[e.ID] = e.Usage.ReasoningTokens
	if j.begunWith == nil {
		j.begunWith = map[string]string{}
	}
	j.begunWith[e.ID] = e.Corrections
	j.mu.Unlock()
}

// begunReasoning is the hidden reasoning a request was journaled with.
func (j *memJournal) begunReasoning(id string) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.reasoning[id]
}
func (j *memJournal) Checkpoint(id, output, _ string, _ *usage.Tokens, _ bool) {
	j.add("checkpoint " + id + " " + output)
}
func (j *memJournal) End(id string)       { j.add("end " + id) }
func (j *memJournal) Fail(e *usage.Event) { j.add("fail " + e.ID) }
func (j *memJournal) HiddenReasoning(avg map[string]int64) {
	j.mu.Lock()
	j.hidden = avg
	j.mu.Unlock()
}
func (j *memJournal) SpendCharges(snapshot []byte) {
	j.mu.Lock()
	j.spend = snapshot
	j.mu.Unlock()
}

// output is the output journaled in id's checkpoints, in order.
func (j *memJournal) output(id string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var b strings.Builder
	for _, c := range j.calls {
		if out, ok := strings.CutPrefix(c, "checkpoint "+id+" "); ok {
			b.WriteString(out)
		}
	}
	return b.String()
}

func (j *memJournal) of(id string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, c := range j.calls {
		if strings.Contains(c, " "+id) {
			out = append(out, strings.SplitN(c, " ", 2)[0])
		}
	}
	return out
}

// stack is a gateway in front of upstream-sim.
type stack struct {
	gw      *gateway.Server
	url     string
	sim     *httptest.Server
	sink    *memSink
	journal *memJournal
}

func providers() []provider.Provider {
	return []provider.Provider{openai.Provider(), anthropic.Provider(), gemini.Provider()}
}

// newStack starts a gateway (cfg edited by edit) in front of a fresh
// upstream-sim, with the demo's providers and models.
func newStack(t *testing.T, edit func(*gateway.Config)) *stack {
	t.Helper()
	cfg, up := simConfig(t)
	if edit != nil {
		edit(&cfg)
	}
	st := &stack{sim: up, sink: &memSink{}, journal: &memJournal{}}
	st.gw = startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: st.sink, Journal: st.journal})
	st.url = "http://" + st.gw.Addr()
	return st
}

// simConfig starts upstream-sim, stopped when the test ends, and returns
// a config of a provider of each type over it and their models.
func simConfig(t *testing.T) (gateway.Config, *httptest.Server) {
	t.Helper()
	up := httptest.NewServer(sim.New())
	t.Cleanup(up.Close)
	return gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "sim", Type: "openai", BaseURL: up.URL + "/v1", APIKey: "sk-sim-secret-key-1234"},
			{Name: "sim-anthropic", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-ant-secret-key-1234"},
			{Name: "sim-gemini", Type: "gemini", BaseURL: up.URL + "/v1beta", APIKey: "gm-secret-key-1234"},
		},
		Models: []gateway.ModelConfig{{Name: "sim-pro", Provider: "sim"}, {Name: "sim-small", Provider: "sim"},
			{Name: "claude-sim", Provider: "sim-anthropic", UpstreamModel: "sim-pro"},
			{Name: "gemini-sim", Provider: "sim-gemini", UpstreamModel: "sim-pro"}},
	}, up
}

// startGateway starts a gateway of cfg and d on a free port, stopped when
// the test ends.
func startGateway(t *testing.T, cfg gateway.Config, d gateway.Deps) *gateway.Server {
	t.Helper()
	gw, err := gateway.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start("127.0.0.1:0", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Stop(ctx)
	})
	return gw
}

// post sends body to path with the test key (as Bearer, unless header
// sets another way), and returns the response.
func (st *stack) post(t *testing.T, path, body string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, st.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if len(header) == 0 {
		req.Header.Set("Authorization", "Bearer "+testKey)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// simStats is what upstream-sim has billed, by its /stats.
func (st *stack) simStats(t *testing.T) sim.Stats {
	t.Helper()
	// The simulator tallies a request when its handler returns, which can
	// be after the client has read the last byte the gateway relayed: wait
	// for the requests in flight to end, so the figures are final.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(st.sim.URL + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		var s sim.Stats
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if s.Requests.InFlight == 0 {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the simulator still has %d requests in flight after 5 s: %+v", s.Requests.InFlight, s)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lines reads an SSE body line by line, in the background, into a channel
// that closes at the end.
func lines(body io.ReadCloser) <-chan string {
	out := make(chan string, 1024)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	return out
}

// until reads lines until one contains want, and returns what it read.
func until(t *testing.T, ls <-chan string, want string) []string {
	t.Helper()
	var got []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-ls:
			if !ok {
				t.Fatalf("stream ended without %q; read:\n%s", want, strings.Join(got, "\n"))
			}
			got = append(got, l)
			if strings.Contains(l, want) {
				return got
			}
		case <-timeout:
			t.Fatalf("no %q within 10s; read:\n%s", want, strings.Join(got, "\n"))
		}
	}
}

var errSpoolRefused = errors.New("spool refused the event: disk full")

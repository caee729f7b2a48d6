package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// nopJournal keeps nothing (memJournal keeps every checkpoint's output,
// which would be measured as the gateway's).
type nopJournal struct{}

func (nopJournal) Begin(*usage.Event, []byte)                             {}
func (nopJournal) Checkpoint(string, string, string, *usage.Tokens, bool) {}
func (nopJournal) End(string)                                             {}
func (nopJournal) Fail(*usage.Event)                                      {}
func (nopJournal) HiddenReasoning(map[string]int64)                       {}
func (nopJournal) SpendCharges([]byte)                                    {}

// TestStreamedOutputDoesNotGrowTheHeapWithoutBound: a stream's relay kept
// every byte of output text it tapped (tap.Report.Output) until the
// request ended, for an estimate it may never need, bounded by nothing but
// request_timeout (1 h by default): an upstream that streams without end
// (a looping model, a broken or hostile server) made one request hold its
// whole output in memory, and a few such requests ended the process (out
// of memory), every stream in it with it. A 256 MB Anthropic stream
// relayed to a client that kept none of it peaked at 781 MB of heap (a
// review). Past gateway.MaxOutputText the stream is now broken off as an
// upstream error, and what was relayed up to there is billed.
func TestStreamedOutputDoesNotGrowTheHeapWithoutBound(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 160 MB")
	}
	chunk := anthEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+
		strings.Repeat("lorem ipsum ", 5000)+`"}}`)
	const total = 160 << 20
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, anthStart(1))
		for n := 0; n < total; n += len(chunk) {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, anthDelta5+anthEv("message_stop", `{"type":"message_stop"}`))
	}))
	defer up.Close()
	cfg := gateway.Config{Providers: []gateway.ProviderConfig{{Name: "up", Type: "anthropic", BaseURL: up.URL + "/v1", APIKey: "sk-up-123456789"}},
		Models: []gateway.ModelConfig{{Name: "m", Provider: "up"}}}
	sink := &memSink{}
	gw := startGateway(t, cfg, gateway.Deps{Providers: providers(), Keys: keys{}, Sink: sink, Journal: nopJournal{}})
	st := &stack{gw: gw, url: "http://" + gw.Addr(), sink: sink}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	}()
	resp := st.post(t, "/anthropic/v1/messages", anthRequest, "x-api-key", testKey)
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	close(done)
	e := sink.event(t, resp.Header.Get("X-Request-Id"))
	if n >= total || n < gateway.MaxOutputText {
		t.Errorf("relayed %d MB of a %d MB stream; want it broken off past %d MB of output", n>>20, total>>20, gateway.MaxOutputText>>20)
	}
	// "lorem ipsum " is three tokens in twelve bytes or so: at least a
	// token per 8 bytes relayed is billed, not the 5 the upstream never
	// got to report.
	if e.Status != usage.StatusUpstreamError || !strings.Contains(e.Error, "MiB of text") ||
		e.UsageSource == usage.SourceUpstream || e.Usage.CompletionTokens < gateway.MaxOutputText/8 {
		t.Errorf("event: status %s, error %q, %s usage %+v; want upstream_error naming the bound, the relayed output billed", e.Status, e.Error, e.UsageSource, e.Usage)
	}
	// Kept whole, the text alone is the stream's 160 MB (a builder's
	// doubling makes it up to 256 MB); bounded, the heap grew 64-75 MB
	// with other work on the machine, and 81-88 MB beside other packages'
	// tests (the collector lags behind the relay's garbage): 120 MB tells
	// the two apart without failing on a busy machine.
	if grew := int64(peak.Load()) - int64(base.HeapInuse); grew > 120<<20 {
		t.Fatalf("relaying %d MB the client kept none of grew the heap by %d MB: the output text is kept whole", n>>20, grew>>20)
	}
}

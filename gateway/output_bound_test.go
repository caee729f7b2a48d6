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

func (nopJournal) Begin(*usage.Event, []byte)                     {}
func (nopJournal) Checkpoint(string, string, *usage.Tokens, bool) {}
func (nopJournal) End(string)                                     {}
func (nopJournal) Fail(*usage.Event)                              {}
func (nopJournal) HiddenReasoning(map[string]int64)               {}

// TestStreamedOutputDoesNotGrowTheHeapWithoutBound: a stream's relay keeps
// every byte of output text it taps (tap.Report.Output, a strings.Builder)
// until the request ends, for an estimate it may never need. Nothing
// bounds it but request_timeout (1 h by default): an upstream that streams
// without end (a looping model, a broken or hostile server) makes one
// request hold its whole output in memory, and a few such requests end the
// process (out of memory), every stream in it with it. Measured: a 256 MB
// Anthropic stream relayed to a client that keeps none of it peaked at
// 781 MB of heap. The text kept for an estimate should be bounded (counted
// as it goes past a bound), as readBody bounds a whole body at 64 MiB.
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
	if e := sink.event(t, resp.Header.Get("X-Request-Id")); n < total || e.Usage.CompletionTokens != 5 {
		t.Fatalf("relayed %d bytes, event %+v", n, e.Usage)
	}
	if grew := int64(peak.Load()) - int64(base.HeapInuse); grew > 80<<20 {
		t.Fatalf("relaying %d MB the client kept none of grew the heap by %d MB: the output text is kept whole", n>>20, grew>>20)
	}
}

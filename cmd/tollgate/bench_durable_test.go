package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// asyncSink publishes in the background and returns at once: the gateway
// before durable-before-done, as a baseline.
type asyncSink struct {
	sink gateway.EventSink
	wg   sync.WaitGroup
}

func (a *asyncSink) Publish(ctx context.Context, e *usage.Event) error {
	c := *e
	a.wg.Go(func() { _ = a.sink.Publish(context.WithoutCancel(ctx), &c) })
	return nil
}

type oneKey struct{}

func (oneKey) LookupKey(string) (usage.KeyState, bool) {
	return usage.KeyState{CustomerID: "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", KeyID: "0197a3c2-9999-7888-8777-666655554444"}, true
}

// BenchmarkDurableBeforeDone is what making the event durable before the
// response's end costs a request: one streamed chat completion at a time
// (10 chunks, unpaced, from upstream-sim in-process) through a gateway
// whose sink is the real durable publisher on an embedded JetStream (file
// storage, sync every 100ms), waited for ("durable") or not ("async", the
// baseline), in the same run. ns/op is the request's total time; ttft-ns
// its time to the first content byte, which durability must not change.
func BenchmarkDurableBeforeDone(b *testing.B) {
	up := httptest.NewServer(sim.New(sim.WithLogger(slog.New(slog.DiscardHandler))))
	defer up.Close()
	js := metertest.Connect(b, metertest.NewServer(b))
	ctx := context.Background()
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		b.Fatal(err)
	}
	spool, err := meter.OpenSpool(b.TempDir(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer spool.Close()
	dead, _ := meter.OpenSpool(b.TempDir(), 0)
	defer dead.Close()
	durable := meter.NewDurablePublisher(meter.NewPublisher(js, meter.StreamConfig{}, 2*time.Second), spool, dead,
		func() bool { return true }, 0, slog.New(slog.DiscardHandler), nil)
	for _, mode := range []string{"async", "durable"} {
		b.Run(mode, func(b *testing.B) {
			var sink gateway.EventSink = durable
			if mode == "async" {
				a := &asyncSink{sink: durable}
				defer a.wg.Wait()
				sink = a
			}
			gw, err := gateway.New(gateway.Config{
				Providers: []gateway.ProviderConfig{{Name: "sim", Type: "openai", BaseURL: up.URL + "/v1"}},
				Models:    []gateway.ModelConfig{{Name: "sim-small", Provider: "sim"}},
			}, gateway.Deps{Providers: providers(), Keys: oneKey{}, Sink: sink, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			if err := gw.Start("127.0.0.1:0", nil); err != nil {
				b.Fatal(err)
			}
			defer gw.Stop(ctx)
			url := "http://" + gw.Addr() + "/v1/chat/completions"
			body := `{"model":"sim-small","stream":true,"stream_options":{"include_usage":true},"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
			var ttft time.Duration
			for b.Loop() {
				start := time.Now()
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer k")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				br := bufio.NewReader(resp.Body)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						b.Fatal(err)
					}
					if strings.Contains(line, `"content":"tok`) {
						ttft += time.Since(start)
						break
					}
				}
				_, _ = io.Copy(io.Discard, br)
				resp.Body.Close()
			}
			b.ReportMetric(float64(ttft.Nanoseconds())/float64(b.N), "ttft-ns")
		})
	}
}

package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsScrapesCapped: /metrics answers at most metricsInFlight
// scrapes at once and refuses the others with 503, at once. It had no cap:
// each scrape gathers every series (and waits on the database check), so
// a flood of them on the admin listener took the process's CPU from the
// requests it serves.
func TestMetricsScrapesCapped(t *testing.T) {
	var gathering atomic.Int32
	entered := make(chan struct{}, 64)
	release := make(chan struct{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "slow", Help: "blocks until released"}, func() float64 {
		gathering.Add(1)
		entered <- struct{}{}
		<-release
		return 1
	}))
	a := &app{log: slog.New(slog.DiscardHandler)}
	h, _ := a.opsHandler(roles{gateway: true}, reg, nil, false)
	srv := httptest.NewServer(h)
	defer srv.Close()

	var wg sync.WaitGroup
	codes := make(chan int, metricsInFlight+8)
	client := &http.Client{Timeout: 5 * time.Second}
	scrape := func() {
		resp, err := client.Get(srv.URL + "/metrics")
		if err != nil { // not answered: waits behind the others
			codes <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes <- resp.StatusCode
	}
	for range metricsInFlight {
		wg.Go(scrape)
	}
	for range metricsInFlight {
		<-entered // each of them gathers
	}
	for range 8 { // more, while those are in flight: refused at once
		scrape()
	}
	close(release)
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[http.StatusOK] != metricsInFlight || count[http.StatusServiceUnavailable] != 8 || int(gathering.Load()) != metricsInFlight {
		t.Fatalf("answers %v, %d gathers; want %d × 200 and 8 × 503, %d gathers", count, gathering.Load(),
			metricsInFlight, metricsInFlight)
	}
}

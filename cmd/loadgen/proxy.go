package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

// proxyMain is `loadgen proxy -listen ADDR -target URL`: a bare
// httputil.ReverseProxy that flushes every write (FlushInterval -1), the
// floor any Go proxy in front of the simulator can reach. Its upstream pool
// keeps up to 1024 idle connections, as tollgate's does, so neither redials.
//
// It reads the request body whole before forwarding it, as tollgate does.
// Streaming it instead breaks on an upstream that answers at once: Go's
// HTTP/1 server closes the inbound body when the response starts, the
// transport's final read of the outbound body then fails and tears the
// upstream connection down mid-stream (golang/go#40747; the client sees an
// unexpected EOF, a few per thousand requests here).
func proxyMain(args []string) error {
	fs := flag.NewFlagSet("loadgen proxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	target := fs.String("target", "", "upstream base URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-target %q is not a URL", *target)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
		Transport:     tr,
		FlushInterval: -1,
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == memPath {
			serveMem(w)
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(os.Stderr, "proxy: ", log.LstdFlags)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// memPath is where the proxy answers its own Go runtime figures (as
// tollgate's /metrics does) instead of forwarding.
const memPath = "/_loadgen/mem"

func serveMem(w http.ResponseWriter) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "go_goroutines %d\ngo_memstats_heap_inuse_bytes %d\ngo_memstats_stack_inuse_bytes %d\ngo_memstats_heap_alloc_bytes %d\ngo_memstats_sys_bytes %d\n",
		runtime.NumGoroutine(), m.HeapInuse, m.StackInuse, m.HeapAlloc, m.Sys)
}

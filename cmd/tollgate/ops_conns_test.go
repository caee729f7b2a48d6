package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOneAddressCannotHoldTheAdminListener: the admin listener holds at
// most 256 connections, and one client address could take them all: 300
// connections that each asked for /metrics and read nothing (a hung
// scraper, or anyone who can reach the listener) held every slot, an
// answered one kept alive for IdleTimeout (120 s), one whose answer the
// kernel's buffers could not hold for as long as its client liked. /readyz,
// which load balancers ask, and Prometheus' scrapes then waited in the accept
// queue (measured against `tollgate serve`: /readyz timed out after 60 s):
// every gateway out of rotation, and no metrics to alert on. One address
// (an IPv6 /64) now holds at most a share of the listener's connections, so
// the health checks and scrapes from other addresses are served.
func TestOneAddressCannotHoldTheAdminListener(t *testing.T) {
	s := newStack(t, nil)
	addr := strings.TrimPrefix(s.admin, "http://")
	ask := "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// From 127.0.0.2: the load balancer below asks from 127.0.0.1.
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for range 300 {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write([]byte(ask))
	}
	time.Sleep(time.Second)
	// A new connection, as a load balancer's health check opens (not one
	// the stack's set-up left idle in http.DefaultTransport).
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Get(s.admin + "/readyz")
	if err != nil {
		t.Fatalf("/readyz while 300 connections from one other address do not read /metrics: %v after %v (the admin listener's 256 connections are held)",
			err, time.Since(start).Round(time.Millisecond))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %d", resp.StatusCode)
	}
}

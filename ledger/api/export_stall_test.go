package api_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestStalledExportClientsAreLetGo: clients that start an export and stop
// reading are taken as gone once a write has waited the export's write
// timeout: their exports end, and the next export is served, not refused
// for want of a slot (a finance review: stalled downloads held their
// database connections for ever).
func TestStalledExportClientsAreLetGo(t *testing.T) {
	s := newServerWith(t, func(a *api.Admin) { api.SetExportWait(a, 300*time.Millisecond) })
	writeBigMonth(t, s, 50_000) // about 10 MB of CSV: more than loopback's socket buffers hold
	u, _ := url.Parse(s.admin)
	path := "/admin/v1/export?from=2024-05-01&to=2024-06-01"
	for range ledger.MaxExports {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", path, u.Host, adminToken)
		if _, err := io.ReadFull(bufio.NewReader(conn), make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		// then nothing more is read
	}
	time.Sleep(2 * time.Second) // the write timeout (300 ms), several times over
	req, _ := http.NewRequest("GET", s.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if n := bytes.Count(b, []byte("\n")); resp.StatusCode != http.StatusOK || err != nil || n != 50_001 {
		t.Fatalf("an export after stalled ones: status %d, %d lines, %v; want the whole export (50,000 rows and the header)", resp.StatusCode, n, err)
	}
}

// TestASlowExportClientIsServedToTheEnd: a client that reads an export
// steadily, a little at a time, is never taken as gone, however slowly
// it reads overall, as long as no wait between its reads comes near the
// export's write timeout. With the socket's send buffer autotuned to
// megabytes, the kernel woke a blocked write only once a third of it had
// drained, so a write waited on the client for longer than the timeout
// while the client was reading (an operators' load test: an export read
// at 20 KB/s was cut off after about 60 s).
func TestASlowExportClientIsServedToTheEnd(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	// The admin API behind the listener the processes serve it on (its
	// connections are where the fix lies).
	adm := newAdmin(t, s.store)
	api.SetExportWait(adm, time.Second)
	l := api.NewListener(adm.Handler(), slog.New(slog.DiscardHandler))
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(ctx) })
	const rows = 30_000 // about 6 MB of CSV
	writeBigMonth(t, s, rows)
	req, _ := http.NewRequest("GET", "http://"+l.Addr()+"/admin/v1/export?from=2024-05-01&to=2024-06-01", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// 8 KiB every 10 ms (800 KiB/s): each read comes a hundredth of the
	// write timeout after the last.
	var got bytes.Buffer
	buf := make([]byte, 8<<10)
	start := time.Now()
	for {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes in %v: %v", got.Len(), time.Since(start), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := bytes.Count(got.Bytes(), []byte("\n")); n != rows+1 {
		t.Fatalf("the export read slowly ended after %d lines (%d bytes, %v); want %d", n, got.Len(), time.Since(start), rows+1)
	}
}

// writeBigMonth writes rows events of one customer and key into May 2024,
// a second apart, 200 bytes or so of export CSV each.
func writeBigMonth(t *testing.T, s *server, rows int) {
	t.Helper()
	ctx := context.Background()
	c, err := s.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "big", Currency: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := s.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	batch := make([]usage.Event, 0, 5000)
	for i := range rows {
		batch = append(batch, event(c.ID, k.ID, "m", day.Add(time.Duration(i)*time.Second), usage.Tokens{PromptTokens: 100, CompletionTokens: 50}))
		if len(batch) == cap(batch) {
			s.write(batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		s.write(batch...)
	}
}

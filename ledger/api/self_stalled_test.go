package api_test

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestStalledCustomerAPIClientsHoldNoSlots: a customer API client that
// asks and then reads nothing held its customer's slot, and one of all
// customers' (half the ledger pool), for as long as it kept the
// connection open: the answer was written under them, with no write
// deadline. A leak review: two customers each pipelining ten GET
// /v1/requests?limit=1000 on two connections they never read from held
// all 4 of the default pool's customer slots, and every other customer's
// GET /v1/balance was answered 429 after 10 s, for as long as those
// connections stayed open (minutes). The slots bound reads of the
// ledger, not writes to a client: a customer that stops reading must
// not keep the others out.
func TestStalledCustomerAPIClientsHoldNoSlots(t *testing.T) {
	s := newServer(t)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var secrets []string
	for _, name := range []string{"a", "b"} {
		c, k, secret := s.customer(fmt.Sprintf(`{"name":%q,"currency":"USD"}`, name))
		evs := make([]usage.Event, 0, 1000)
		for i := range 1000 {
			evs = append(evs, event(c, k, "m", at.Add(time.Duration(i)*time.Second), usage.Tokens{PromptTokens: 100, CompletionTokens: 50}))
		}
		s.write(evs...)
		secrets = append(secrets, secret)
	}
	_, _, victim := s.customer(`{"name":"c","currency":"USD"}`)

	u, _ := url.Parse(s.llm)
	for _, secret := range secrets {
		for range 2 {
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			_ = conn.(*net.TCPConn).SetReadBuffer(4096)
			for range 10 { // about 7 MB of answers: more than loopback's buffers hold
				fmt.Fprintf(conn, "GET /v1/requests?limit=1000 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", u.Host, secret)
			}
		}
	}
	time.Sleep(2 * time.Second) // the answers fill the buffers; their writes block

	client := &http.Client{Timeout: 3 * time.Second}
	req, _ := http.NewRequest("GET", s.llm+"/v1/balance", nil)
	req.Header.Set("Authorization", "Bearer "+victim)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("another customer's GET /v1/balance while two customers' clients read nothing: %v after %s; want 200 at once", err, time.Since(start).Round(time.Millisecond))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another customer's GET /v1/balance while two customers' clients read nothing = %d after %s; want 200", resp.StatusCode, time.Since(start).Round(time.Millisecond))
	}
}

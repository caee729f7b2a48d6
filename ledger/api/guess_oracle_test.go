package api_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger/api"
)

// TestReadAheadDoesNotTellTheTokenPastTheGuessLimit: the admin listener
// reads ahead the bodies of requests with the admin token alone
// (Admin.Authorized), and it compared the token without the guess limit:
// an address answered 429 for every token could still tell the right one,
// as a POST declaring a 2 MiB body was answered 400 "larger than 1 MiB"
// at once with it and 429 with any other (and a body held back, waited on
// with it, was answered at once without). An address that must wait is
// answered alike whatever token it sends.
func TestReadAheadDoesNotTellTheTokenPastTheGuessLimit(t *testing.T) {
	adm, err := api.NewAdmin(nil, "the-admin-token", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l := api.NewListener(adm.Handler(), slog.New(slog.DiscardHandler))
	l.SetTrusted(adm.Authorized)
	if err := l.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	// status sends a POST's headers, declaring a body of n bytes, and
	// reads the status of the answer; the body is sent when it is small.
	status := func(token string, n int) int {
		t.Helper()
		c, err := net.Dial("tcp", l.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /admin/v1/customers HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", token, n)
		if n <= 2 {
			fmt.Fprint(c, "{}"[:n])
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range api.GuessBurst {
		if got := status("guess", 2); got != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, got)
		}
	}
	wrong, right := status("guess", 2<<20), status("the-admin-token", 2<<20)
	if wrong != http.StatusTooManyRequests || right != wrong {
		t.Fatalf("past the guess limit, a 2 MiB body: %d with a wrong token, %d with the right one; want 429 for both", wrong, right)
	}
}

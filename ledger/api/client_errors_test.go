package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestClientErrors: each error the server answers comes back through the
// client as a ledger error with the server's code and message; answers
// from something in front of the API get their status's code; no answer
// at all is an *UnreachableError.
func TestClientErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), context.Background()
	id, _, _ := s.customer(`{"name":"a"}`)
	unknown := uuid.NewString()

	_, err := c.Customer(ctx, unknown)
	wantCode(t, "Customer(unknown)", err, ledger.ENotFound, "customer "+unknown+" not found")
	_, err = api.NewClient(s.admin, "wrong", nil).Customers(ctx, "")
	wantCode(t, "a wrong token", err, ledger.EUnauthorized, "admin token")
	_, err = c.DeadLetters(ctx, 10)
	wantCode(t, "DeadLetters without NATS", err, ledger.EUnavailable, "dead-letter stream")

	// Every route with an id refuses one that is not a UUID, before any
	// query, naming what the id identifies.
	for what, call := range map[string]func(string) error{
		"customer Customer": func(x string) error { _, err := c.Customer(ctx, x); return err },
		"customer UpdateCustomer": func(x string) error {
			_, err := c.UpdateCustomer(ctx, x, ledger.CustomerPatch{SetCreditLimit: true})
			return err
		},
		"customer Balance":        func(x string) error { _, err := c.Balance(ctx, x); return err },
		"customer CreateKey":      func(x string) error { _, err := c.CreateKey(ctx, x, ledger.KeyInput{}); return err },
		"customer Keys":           func(x string) error { _, err := c.Keys(ctx, x); return err },
		"customer CreateOverride": func(x string) error { _, err := c.CreateOverride(ctx, x, ledger.OverrideInput{}); return err },
		"customer Overrides":      func(x string) error { _, err := c.Overrides(ctx, x); return err },
		"customer AddEntry": func(x string) error {
			_, err := c.AddEntry(ctx, x, ledger.KindCredit, ledger.EntryInput{Amount: "1"})
			return err
		},
		"customer Entries":   func(x string) error { _, err := c.Entries(ctx, x, time.Time{}, time.Time{}); return err },
		"customer Statement": func(x string) error { _, err := c.Statement(ctx, x, "2026-01"); return err },
		"key RevokeKey":      func(x string) error { _, err := c.RevokeKey(ctx, x); return err },
		"event Event":        func(x string) error { _, err := c.Event(ctx, x); return err },
		"event RefundEvent":  func(x string) error { _, err := c.RefundEvent(ctx, x, ""); return err },
	} {
		kind, method, _ := strings.Cut(what, " ")
		for _, bad := range []string{"nope", strings.ReplaceAll(id, "-", ""), id + "0"} {
			wantCode(t, method+"("+bad+")", call(bad), ledger.EInvalid, fmt.Sprintf("%s id %q is not valid", kind, bad))
		}
	}

	// A server whose database is gone answers internal, with no details.
	store := ledgertest.NewStore(t)
	adm := newAdmin(t, store)
	broken := httptest.NewServer(adm.Handler())
	t.Cleanup(broken.Close)
	store.Close()
	_, err = api.NewClient(broken.URL, adminToken, nil).Customers(ctx, "")
	wantCode(t, "a server without its database", err, ledger.EInternal, "internal error; see the server log")

	// Something in front of the API: its status says the code.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/admin/v1/customers":
			http.Error(w, "forbidden by the proxy", http.StatusForbidden)
		case "/admin/v1/prices":
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusUnprocessableEntity)
			w.Write([]byte(`{"error":{"message":"not like that","code":"unprocessable"}}`))
		}
	}))
	t.Cleanup(proxy.Close)
	pc := api.NewClient(proxy.URL+"/", adminToken, nil)
	_, err = pc.Customers(ctx, "")
	wantCode(t, "a proxy's 403", err, ledger.EUnauthorized, "forbidden by the proxy (HTTP 403)")
	_, err = pc.Prices(ctx, "")
	wantCode(t, "a proxy's 502", err, ledger.EInternal, "Bad Gateway (HTTP 502)")
	_, err = pc.Keys(ctx, id)
	wantCode(t, "a 422 with an unknown code", err, ledger.EInvalid, "not like that")

	// No answer at all.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	noErr(t, "listen", err)
	closed := "http://" + l.Addr().String()
	l.Close()
	var ue *api.UnreachableError
	_, err = api.NewClient(closed, adminToken, nil).Customers(ctx, "")
	if !errors.As(err, &ue) || ledger.ErrorCode(err) != "" ||
		!strings.Contains(err.Error(), "cannot reach the admin API at "+closed) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a closed port: %v, want an *UnreachableError", err)
	}
	if err := c.WaitHealthy(ctx, time.Second); err != nil {
		t.Errorf("WaitHealthy: %v", err)
	}
	if err := api.NewClient(closed, "", nil).WaitHealthy(ctx, 100*time.Millisecond); !errors.As(err, &ue) {
		t.Errorf("WaitHealthy on a closed port: %v, want an *UnreachableError (see TestWaitHealthyUnreachable)", err)
	}
}

// cutWriter passes the first after bytes of a response on, flushed, then
// fails every write: the connection to the client broke mid-answer.
type cutWriter struct {
	http.ResponseWriter
	after int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if len(p) > w.after {
		n, _ := w.ResponseWriter.Write(p[:w.after])
		w.after = 0
		w.ResponseWriter.(http.Flusher).Flush()
		return n, errors.New("connection cut")
	}
	w.after -= len(p)
	return w.ResponseWriter.Write(p)
}

// TestClientExportCutShort: an export the server aborts midway (here its
// writes fail after a few bytes) is an error saying after how many bytes,
// never a complete-looking export.
func TestClientExportCutShort(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a, keyA, _ := s.customer(`{"name":"a"}`)
	at := time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC)
	s.write(event(a, keyA, "m", at, usage.Tokens{PromptTokens: 1}), event(a, keyA, "m", at, usage.Tokens{PromptTokens: 2}))
	adm := newAdmin(t, s.store)
	h := adm.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&cutWriter{ResponseWriter: w, after: 40}, r)
	}))
	t.Cleanup(srv.Close)
	var got bytes.Buffer
	n, err := api.NewClient(srv.URL, adminToken, nil).Export(context.Background(), at.Add(-time.Hour), at.Add(time.Hour), &got)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the download stopped after %d bytes", n)) || n != 40 || got.Len() != 40 {
		t.Fatalf("Export cut short: %d bytes, %q, %v", n, got.String(), err)
	}
}

// TestClientDeadLetters: list and replay through the client, against the
// admin API over a real dead-letter stream; an unknown sequence is not
// found, and then nothing is replayed.
func TestClientDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, deadLetter := newDLQServer(t)
	c := s.client()
	for _, reason := range []string{"schema version 7", "schema version 8"} {
		deadLetter(`{"v":7}`, reason)
	}

	ls, err := c.DeadLetters(ctx, 10)
	noErr(t, "DeadLetters", err)
	if len(ls) != 2 || ls[0].Reason != "schema version 7" || ls[0].Data != `{"v":7}` {
		t.Fatalf("DeadLetters = %+v", ls)
	}
	_, err = c.DeadLetters(ctx, 0)
	wantCode(t, "DeadLetters(0)", err, ledger.EInvalid, "limit")

	n, err := c.ReplayDeadLetters(ctx, []uint64{ls[0].Seq, 999})
	wantCode(t, "ReplayDeadLetters with an unknown sequence", err, ledger.ENotFound, "dead letter 999 not found")
	if left, _ := c.DeadLetters(ctx, 10); n != 0 || len(left) != 2 {
		t.Fatalf("after a refused replay: %d replayed, %d left, want 0 and 2", n, len(left))
	}
	n, err = c.ReplayDeadLetters(ctx, []uint64{ls[0].Seq, ls[0].Seq})
	noErr(t, "ReplayDeadLetters", err)
	_, err = c.ReplayDeadLetters(ctx, []uint64{ls[0].Seq})
	wantCode(t, "ReplayDeadLetters of a replayed one", err, ledger.ENotFound, "not found")
	all, err := c.ReplayDeadLetters(ctx, nil)
	noErr(t, "ReplayDeadLetters(all)", err)
	left, err := c.DeadLetters(ctx, 10)
	noErr(t, "DeadLetters", err)
	if n != 1 || all != 1 || len(left) != 0 {
		t.Fatalf("replayed %d, then all %d, %d left; want 1, 1, 0", n, all, len(left))
	}
}

// TestClientReplayOfACutGroupIsAConflict: a set-aside group cut to the
// dead-letter stream's 512 KiB is replayed as its events, and its last
// line is not whole: the admin API refuses it as a conflict naming its
// sequence (it answered 200 and sent the data back to be set aside again),
// and replays nothing.
func TestClientReplayOfACutGroupIsAConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, deadLetter := newDLQServer(t)
	seq := deadLetter("{\"v\":1}\n{\"v\":1,\"id\":\"cut her", "malformed group: its Tollgate-Events header counts 3 events, its data holds 2 lines; "+
		"set aside whole (the message's 600000 bytes are cut to its first 524032 here)")
	n, err := s.client().ReplayDeadLetters(ctx, nil)
	wantCode(t, "ReplayDeadLetters of a cut group", err, ledger.EConflict, fmt.Sprintf("dead letter %d", seq))
	if left, _ := s.client().DeadLetters(ctx, 10); n != 0 || len(left) != 1 {
		t.Fatalf("after a refused replay: %d replayed, %d left, want 0 and 1", n, len(left))
	}
}

// TestInputTheDatabaseCannotStoreIsInvalid: a NUL byte in text (Postgres
// refuses it) or a count past its column is refused as invalid (400),
// never answered as an internal error.
func TestInputTheDatabaseCannotStoreIsInvalid(t *testing.T) {
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"acme"}`)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/admin/v1/customers", `{"name":"a\u0000b"}`},
		{"GET", "/admin/v1/customers?name=a%00b", ""},
		{"GET", "/admin/v1/prices?model=a%00b", ""},
		{"POST", "/admin/v1/customers/" + cust + "/keys", `{"name":"k\u0000"}`},
		{"POST", "/admin/v1/customers/" + cust + "/keys", `{"name":"k","max_concurrent":3000000000}`},
		{"POST", "/admin/v1/customers/" + cust + "/credits", `{"amount":"10","memo":"top-up\u0000"}`},
		{"POST", "/admin/v1/prices", `{"model":"m\u0000","currency":"USD","input":"1","output":"1","effective_from":"2026-01-01T00:00:00Z"}`},
	} {
		status, body, err := send(c.method, s.admin+c.path, adminToken, c.body)
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusBadRequest || !strings.Contains(string(body), `"invalid"`) {
			t.Errorf("%s %s %s = %d %s, want 400 invalid", c.method, c.path, c.body, status, body)
		}
	}
}

// TestPropagationOffWithoutNATS: an admin API that publishes key changes
// to no gateway (it runs without NATS) says so on every key change, so
// that an operator looking for "pending" or "done" learns why neither
// comes: the header was absent.
func TestPropagationOffWithoutNATS(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	c, err := s.client().CreateCustomer(ctx, ledger.CustomerInput{Name: "c"})
	noErr(t, "CreateCustomer", err)
	req, _ := http.NewRequest("POST", s.admin+"/admin/v1/customers/"+c.ID+"/keys", strings.NewReader(`{"name":"k"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	noErr(t, "POST keys", err)
	resp.Body.Close()
	if p := resp.Header.Get(api.PropagationHeader); resp.StatusCode != http.StatusCreated || p != "off" {
		t.Fatalf("a key created: %d, %s %q; want 201, off", resp.StatusCode, api.PropagationHeader, p)
	}
}

// TestWaitHealthyUnreachable: `tollgate demo` against an admin URL nothing
// listens on exited 1, where the README gives 7 (server unreachable):
// WaitHealthy's deadline error was not an *UnreachableError. A server that
// answers, but not 200, is another error naming its status.
func TestWaitHealthyUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	err = api.NewClient("http://"+addr, "t", nil).WaitHealthy(context.Background(), 300*time.Millisecond)
	var unreachable *api.UnreachableError
	if !errors.As(err, &unreachable) {
		t.Fatalf("nothing listening: %v (%T), want an *UnreachableError", err, err)
	}
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer sick.Close()
	err = api.NewClient(sick.URL, "t", nil).WaitHealthy(context.Background(), 300*time.Millisecond)
	if err == nil || errors.As(err, &unreachable) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a server answering 503: %v, want an error naming 503", err)
	}
}

// TestClientRemoveDeadLetters: removing one of two dead letters through
// the admin API leaves the other; an unknown sequence is not found and
// removes nothing, the letters beside it included; no sequences is
// refused (there is no "remove all": removed usage is lost for good).
func TestClientRemoveDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, deadLetter := newDLQServer(t)
	c := s.client()
	for _, reason := range []string{"schema version 7", "schema version 8"} {
		deadLetter(`{"v":7}`, reason)
	}
	ls, err := c.DeadLetters(ctx, 10)
	noErr(t, "DeadLetters", err)

	n, err := c.RemoveDeadLetters(ctx, []uint64{ls[1].Seq, 999})
	wantCode(t, "RemoveDeadLetters with an unknown sequence", err, ledger.ENotFound, "dead letter 999 not found")
	if left, _ := c.DeadLetters(ctx, 10); n != 0 || len(left) != 2 {
		t.Fatalf("after a refused removal: %d removed, %d left, want 0 and 2", n, len(left))
	}
	_, err = c.RemoveDeadLetters(ctx, nil)
	wantCode(t, "RemoveDeadLetters of nothing", err, ledger.EInvalid, "seqs")
	_, err = c.RemoveDeadLetters(ctx, []uint64{0})
	wantCode(t, "RemoveDeadLetters of sequence 0", err, ledger.EInvalid, "sequences start at 1")

	n, err = c.RemoveDeadLetters(ctx, []uint64{ls[0].Seq})
	noErr(t, "RemoveDeadLetters", err)
	left, err := c.DeadLetters(ctx, 10)
	noErr(t, "DeadLetters", err)
	if n != 1 || len(left) != 1 || left[0].Seq != ls[1].Seq {
		t.Fatalf("removed %d, left %+v; want 1, and letter %d", n, left, ls[1].Seq)
	}
}

// TestClientReplayDeadLettersProgress: a replay of many dead letters
// takes minutes (about 1,000 a second), and was one request answered
// only at its end. A client accepting application/x-ndjson now gets the
// letters to replay and then how many are done, then the result; errors
// found before any letter is sent (an unknown sequence) are still
// answered with their status.
func TestClientReplayDeadLettersProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, deadLetter := newDLQServer(t)
	c := s.client()
	for range 3 {
		deadLetter(`{"v":7}`, "schema version 7")
	}
	var seen [][2]int
	progress := func(done, total int) { seen = append(seen, [2]int{done, total}) }
	_, err := c.ReplayDeadLettersProgress(ctx, []uint64{999}, progress)
	wantCode(t, "ReplayDeadLettersProgress with an unknown sequence", err, ledger.ENotFound, "dead letter 999 not found")
	n, err := c.ReplayDeadLettersProgress(ctx, nil, progress)
	noErr(t, "ReplayDeadLettersProgress(all)", err)
	if n != 3 || len(seen) == 0 || seen[0] != [2]int{0, 3} {
		t.Fatalf("replayed %d, progress %v; want 3, and a first line of 0 of 3", n, seen)
	}
}

// TestClientWithoutTokenSpendsNoGuesses: the CLI run where
// TOLLGATE_ADMIN_TOKEN is not set (a new shell, a cron job's environment)
// sent "Authorization: Bearer " with nothing after it, which the admin API
// counted as a wrong token: past GuessBurst such runs, its address (the
// operators' bastion, say) was answered 429 for every token, the right one
// included. A client without a token sends no Authorization header, which
// is refused (401) and not counted as a guess.
func TestClientWithoutTokenSpendsNoGuesses(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	none := api.NewClient(s.admin, "", nil)
	for i := range api.GuessBurst + 2 {
		if _, err := none.Customers(ctx, ""); ledger.ErrorCode(err) != ledger.EUnauthorized {
			t.Fatalf("request %d without a token: %v, want unauthorized", i+1, err)
		}
	}
	if _, err := s.client().Customers(ctx, ""); err != nil {
		t.Fatalf("the admin token after %d requests without one: %v, want it served", api.GuessBurst+2, err)
	}
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestCLIDeadLetters: a poison message lands in the dead-letter stream,
// `tollgate dlq list` shows it with its reason, `tollgate dlq replay`
// sends it back (where it is set aside again: it is still poison).
func TestCLIDeadLetters(t *testing.T) {
	s := newStack(t, nil)
	js, err := jetstream.New(s.app.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), "tollgate.usage.v1", []byte(`{"v":7,"id":"x"}`)); err != nil {
		t.Fatal(err)
	}
	var out string
	for range 100 {
		if out = s.tgOK("dlq", "list"); strings.Contains(out, "schema version 7") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out, "SEQ") || !strings.Contains(out, "schema version 7") {
		t.Fatalf("dlq list:\n%s", out)
	}
	if got := s.tgOK("dlq", "replay", "--all"); !strings.Contains(got, "replayed 1 dead letter\n") {
		t.Fatalf("dlq replay: %s", got)
	}
	s.tgFail(exitUsage, "give --seq or --all", "dlq", "replay")
	s.tgFail(exitUsage, "not both", "dlq", "replay", "--seq", "1", "--all")
	s.tgFail(exitUsage, "names no sequence", "dlq", "replay", "--seq", ",")
	// An unknown sequence is not found (it was an internal error), and
	// nothing is replayed.
	s.tgFail(exitNotFound, "dead letter 999999 not found", "dlq", "replay", "--seq", "999999")
	// Sequence 0, which JetStream refuses as a bad request (it was an
	// internal error), is refused before anything is sent.
	s.tgFail(exitUsage, "sequences start at 1", "dlq", "replay", "--seq", "0")
	// And by the admin API itself: a 400 naming the field, not a 500.
	var apiErr struct {
		Error struct{ Message string } `json:"error"`
	}
	s.adminDo("POST", "/admin/v1/dlq/replay", `{"seqs":[0]}`, 400, &apiErr)
	if !strings.Contains(apiErr.Error.Message, "sequences start at 1") {
		t.Errorf("replay of sequence 0: %+v", apiErr)
	}
	s.tgFail(exitUsage, "--limit: 0 is not from 1 to 10000", "dlq", "list", "--limit", "0")
}

// TestCLIDeadLetterPages: `tollgate dlq list` pages as the other lists
// do: 25 dead letters, 10 a page, followed with --cursor from the "More
// dead letters follow" hint, are all 25 once, in order, and the last page
// has no hint; --all lists the 25; a cursor that is not a sequence is
// refused. It listed the oldest --limit letters and nothing past them.
func TestCLIDeadLetterPages(t *testing.T) {
	s := newStack(t, nil)
	js, err := jetstream.New(s.app.nc)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	for i := range 25 {
		msg := nats.NewMsg("tollgate.usage.dlq")
		msg.Data = []byte(fmt.Sprintf(`{"v":7,"n":%d}`, i))
		msg.Header.Set("Tollgate-Reason", "schema version 7")
		ack, err := js.PublishMsg(context.Background(), msg)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, strconv.FormatUint(ack.Sequence, 10))
	}
	var got []string
	args := []string{"dlq", "list", "--limit", "10"}
	hints := 0
	for range 5 {
		r := s.tg(args...)
		if r.code != exitOK {
			t.Fatalf("tollgate %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.errOut)
		}
		for line := range strings.Lines(r.out) {
			if f := strings.Fields(line); len(f) > 0 && f[0] != "SEQ" {
				got = append(got, f[0])
			}
		}
		_, cursor, more := strings.Cut(strings.TrimSpace(r.errOut), "add --cursor ")
		if !more {
			if r.errOut != "" {
				t.Fatalf("the last page's stderr: %q", r.errOut)
			}
			break
		}
		hints++
		if !strings.HasPrefix(r.errOut, "More dead letters follow:") {
			t.Fatalf("the hint: %q", r.errOut)
		}
		cursor, _, _ = strings.Cut(cursor, ",")
		args = []string{"dlq", "list", "--limit", "10", "--cursor", cursor}
	}
	if strings.Join(got, " ") != strings.Join(seqs, " ") || hints != 2 {
		t.Fatalf("pages listed %v with %d hints; want %v with 2", got, hints, seqs)
	}
	var all struct {
		Data []struct {
			Seq uint64 `json:"seq"`
		} `json:"data"`
		NextCursor string `json:"next_cursor"`
	}
	s.tgJSON(&all, "dlq", "list", "--all", "--limit", "7")
	if len(all.Data) != 25 || all.NextCursor != "" {
		t.Fatalf("dlq list --all: %d letters, next_cursor %q; want 25 and none", len(all.Data), all.NextCursor)
	}
	s.tgFail(exitUsage, "not both", "dlq", "list", "--all", "--cursor", seqs[3])
	s.tgFail(exitInvalid, "cursor", "dlq", "list", "--cursor", "abc")
}

// TestCLIDeadLetterReplayProgress: dlq replay --progress shows on stderr
// how many of the letters are replayed, as the admin API streams it: a
// replay of an outage's letters ran for minutes with nothing shown. The
// server stands in for the replay route.
func TestCLIDeadLetterReplayProgress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "application/x-ndjson" {
			t.Errorf("Accept %q, want application/x-ndjson", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write([]byte(`{"progress":{"replayed":0,"total":3}}` + "\n" + `{"progress":{"replayed":2,"total":3}}` + "\n" +
			`{"progress":{"replayed":3,"total":3}}` + "\n" + `{"result":{"replayed":3}}` + "\n"))
	}))
	defer srv.Close()
	r := runTollgate(t, nil, "dlq", "replay", "--all", "--progress", "--admin-url", srv.URL)
	if r.code != exitOK || r.out != "replayed 3 dead letters\n" ||
		!strings.Contains(r.errOut, "0 of 3 dead letters replayed") || !strings.Contains(r.errOut, "3 of 3 dead letters replayed") {
		t.Fatalf("dlq replay --progress: exit %d, stdout %q, stderr %q; want the progress on stderr and the count on stdout", r.code, r.out, r.errOut)
	}
	r = runTollgate(t, nil, "dlq", "replay", "--all", "--admin-url", srv.URL)
	if r.code != exitOK || r.errOut != "" {
		t.Fatalf("dlq replay without --progress, stderr not a terminal: exit %d, stderr %q; want no progress", r.code, r.errOut)
	}
}

// TestCLIDeadLetterListDefaults: `tollgate dlq list` without --limit
// lists 100 dead letters a page, as docs/operations.md and its --help say,
// with each letter's event id in the EVENT column; --limit takes 1 to
// 10000, the edge included, and refuses 10001 as bad usage before anything
// is sent; an empty list is "data": [] in --json, not null (jq's
// `.data[]` fails on null); dlq replay and dlq remove print their counts
// as "replayed" and "removed" in --json, and remove takes --seq given
// several times and as N,M, removing every letter named.
func TestCLIDeadLetterListDefaults(t *testing.T) {
	s := newStack(t, nil)
	js, err := jetstream.New(s.app.nc)
	if err != nil {
		t.Fatal(err)
	}
	if out := s.tgOK("dlq", "list", "--json"); !strings.Contains(out, `"data": []`) {
		t.Fatalf("dlq list --json of no dead letters: %s; want \"data\": []", out)
	}
	var seqs []string
	for i := range 101 {
		msg := nats.NewMsg("tollgate.usage.dlq")
		msg.Data = []byte(fmt.Sprintf(`{"v":7,"n":%d}`, i))
		msg.Header.Set("Tollgate-Reason", "schema version 7")
		msg.Header.Set("Tollgate-Event-Id", fmt.Sprintf("evt-%d", i))
		ack, err := js.PublishMsg(context.Background(), msg)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, strconv.FormatUint(ack.Sequence, 10))
	}
	r := s.tg("dlq", "list")
	rows := tableRows(t, r.out, "SEQ")
	if r.code != exitOK || len(rows) != 100 || rows[0][0] != seqs[0] || rows[99][0] != seqs[99] ||
		!strings.Contains(r.errOut, "add --cursor "+seqs[99]+",") {
		t.Fatalf("dlq list of 101 dead letters: exit %d, %d rows, stderr %q; want the first 100 and a hint to --cursor %s", r.code, len(rows), r.errOut, seqs[99])
	}
	if rows[0][2] != "evt-0" || rows[99][2] != "evt-99" {
		t.Fatalf("dlq list's EVENT column: %q, %q; want evt-0, evt-99", rows[0][2], rows[99][2])
	}
	r = s.tg("dlq", "list", "--limit", "10000")
	if rows := tableRows(t, r.out, "SEQ"); r.code != exitOK || len(rows) != 101 || r.errOut != "" {
		t.Fatalf("dlq list --limit 10000: exit %d, %d rows, stderr %q; want all 101, no hint", r.code, len(rows), r.errOut)
	}
	s.tgFail(exitUsage, "--limit: 10001 is not from 1 to 10000", "dlq", "list", "--limit", "10001")

	var removed map[string]int
	s.tgJSON(&removed, "dlq", "remove", "--seq", seqs[0], "--seq", seqs[1]+","+seqs[2], "--yes")
	if len(removed) != 1 || removed["removed"] != 3 {
		t.Fatalf("dlq remove of 3 --json: %v; want {\"removed\": 3}", removed)
	}
	if rows := tableRows(t, s.tgOK("dlq", "list", "--limit", "10000"), "SEQ"); len(rows) != 98 || rows[0][0] != seqs[3] {
		t.Fatalf("after removing %s, %s and %s, dlq list shows %d letters from %v; want 98 from %s", seqs[0], seqs[1], seqs[2], len(rows), rows[0], seqs[3])
	}
	var replayed map[string]int
	s.tgJSON(&replayed, "dlq", "replay", "--seq", seqs[3])
	if len(replayed) != 1 || replayed["replayed"] != 1 {
		t.Fatalf("dlq replay of one --json: %v; want {\"replayed\": 1}", replayed)
	}
}

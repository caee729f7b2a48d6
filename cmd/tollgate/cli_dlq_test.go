package main

import (
	"context"
	"strings"
	"testing"
	"time"

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
	if got := s.tgOK("dlq", "replay", "--all"); !strings.Contains(got, "replayed 1 dead letters") {
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
	s.tgFail(exitInvalid, "limit", "dlq", "list", "--limit", "0")
}

package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestCLIDeadLetterRemove: `tollgate dlq remove` refuses without --yes
// (removed usage is dropped from billing for good), removes the letter
// named and leaves the other, which dlq list still shows; an unknown
// sequence is not found and removes nothing; the server logs the removed
// letter, its data included, at WARN.
func TestCLIDeadLetterRemove(t *testing.T) {
	logs := &syncBuffer{}
	s := newStackLogs(t, nil, nil, logs)
	js, err := jetstream.New(s.app.nc)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	for _, v := range []string{"7", "8"} {
		msg := nats.NewMsg(meter.DLQSubject)
		msg.Data = []byte(`{"v":` + v + `,"id":"evt-` + v + `"}`)
		msg.Header.Set(meter.HeaderReason, "schema version "+v)
		msg.Header.Set(meter.HeaderEventID, "evt-"+v)
		ack, err := js.PublishMsg(context.Background(), msg)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, strconv.FormatUint(ack.Sequence, 10))
	}
	s.tgFail(exitUsage, "--yes", "dlq", "remove", "--seq", seqs[0])
	s.tgFail(exitUsage, "give --seq", "dlq", "remove", "--yes")
	s.tgFail(exitUsage, "sequences start at 1", "dlq", "remove", "--seq", "0", "--yes")
	s.tgFail(exitNotFound, "dead letter 999999 not found", "dlq", "remove", "--seq", seqs[0], "--seq", "999999", "--yes")
	if out := s.tgOK("dlq", "list"); !strings.Contains(out, "schema version 7") || !strings.Contains(out, "schema version 8") {
		t.Fatalf("after refused removals, dlq list:\n%s", out)
	}
	if got := s.tgOK("dlq", "remove", "--seq", seqs[0], "--yes"); !strings.Contains(got, "removed 1 dead letter: "+seqs[0]) {
		t.Fatalf("dlq remove: %s", got)
	}
	if out := s.tgOK("dlq", "list"); strings.Contains(out, "schema version 7") || !strings.Contains(out, "schema version 8") {
		t.Fatalf("after removing %s, dlq list:\n%s", seqs[0], out)
	}
	var warned bool
	for _, l := range strings.Split(logs.String(), "\n") {
		warned = warned || strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, `"event_id":"evt-7"`) &&
			strings.Contains(l, `{\"v\":7,\"id\":\"evt-7\"}`) && strings.Contains(l, `"seq":`+seqs[0])
	}
	if !warned {
		t.Fatalf("no WARN line with the removed letter in the log:\n%s", logs.String())
	}
	// The admin API refuses a removal of nothing: there is no "remove all".
	s.adminDo("POST", "/admin/v1/dlq/remove", `{"seqs":[]}`, 400, nil)
	s.adminDo("POST", "/admin/v1/dlq/remove", `{}`, 400, nil)
}

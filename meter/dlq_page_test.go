package meter_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestDLQListPages: 25 dead letters listed 10 at a time, each page from
// the sequence after the last one listed, give all 25 once, in order,
// the last page 5; a page after a letter replayed or removed since (its
// sequence no longer held) goes on from the next one. List read only
// from the oldest: an operator with more dead letters than one page
// could not see the rest.
func TestDLQListPages(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq := mustDLQ(t, js)
	var seqs []uint64
	for i := range 25 {
		msg := nats.NewMsg(meter.DLQSubject)
		msg.Data = []byte(`{"v":7,"n":` + strconv.Itoa(i) + `}`)
		msg.Header.Set(meter.HeaderReason, "schema version 7")
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	var got []uint64
	var sizes []int
	for after := uint64(0); ; {
		page, err := dlq.List(ctx, after, 10)
		if err != nil {
			t.Fatalf("List(after %d): %v", after, err)
		}
		sizes = append(sizes, len(page))
		if len(page) == 0 || len(sizes) > 10 {
			break
		}
		for _, l := range page {
			got = append(got, l.Seq)
		}
		after = page[len(page)-1].Seq
	}
	if len(got) != 25 || len(sizes) != 4 || sizes[2] != 5 || sizes[3] != 0 {
		t.Fatalf("pages of %v: %v; want 25 letters in pages of 10, 10, 5, 0", sizes, got)
	}
	for i := range got {
		if got[i] != seqs[i] {
			t.Fatalf("letter %d is sequence %d, want %d (all: %v)", i, got[i], seqs[i], got)
		}
	}

	// The letter a cursor names is gone (removed): the next page starts
	// at the one after it.
	if _, err := dlq.Remove(ctx, []uint64{seqs[9], seqs[10]}); err != nil {
		t.Fatal(err)
	}
	page, err := dlq.List(ctx, seqs[9], 3)
	if err != nil || len(page) != 3 || page[0].Seq != seqs[11] || page[2].Seq != seqs[13] {
		t.Fatalf("List after a removed letter = %+v, %v; want sequences %v", page, err, seqs[11:14])
	}
	// After the last: none, not an error.
	if page, err := dlq.List(ctx, seqs[24], 10); err != nil || len(page) != 0 {
		t.Fatalf("List after the last = %+v, %v; want none", page, err)
	}
}

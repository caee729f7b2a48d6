package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/fixture"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// recorded is one recorded Anthropic stream and what expected.json says.
type recorded struct {
	name   string // path relative to the fixture folder
	raw    []byte
	events []sse.Event
	want   fixture.Expected
}

// recordings loads every stream of the fixtures' anthropic/ folder. A
// missing folder or expectation is fatal: the tests are the point.
func recordings(t testing.TB) []recorded {
	t.Helper()
	_, recs, err := fixture.Recordings("anthropic")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]recorded, 0, len(recs))
	for _, r := range recs {
		out = append(out, recorded{name: r.Name, raw: r.Raw, events: readEvents(t, r.Raw), want: r.Want})
	}
	return out
}

// readEvents parses a stream into events that own their bytes.
func readEvents(t testing.TB, raw []byte) []sse.Event {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(raw))
	var out []sse.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sse.Event{Type: clone(ev.Type), Data: clone(ev.Data), HasData: ev.HasData})
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// estimator returns the tokenizer, failing the test if it cannot load.
func estimator(t testing.TB) *tap.Estimator {
	t.Helper()
	est, err := tap.NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	return est
}

// stream makes events from "type: data" lines, one event each; a line
// starting with "data:" has no event type.
func stream(lines ...string) []sse.Event {
	var out []sse.Event
	for _, l := range lines {
		if d, ok := strings.CutPrefix(l, "data:"); ok {
			out = append(out, sse.Event{Data: []byte(d), HasData: true})
			continue
		}
		typ, data, _ := strings.Cut(l, ": ")
		out = append(out, sse.Event{Type: []byte(typ), Data: []byte(data), HasData: true})
	}
	return out
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t testing.TB, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// tapped runs events through a new Tap and returns its report.
func tapped(events []sse.Event) *tap.Report {
	var tp Tap
	r := new(tap.Report)
	for i := range events {
		tp.Event(&events[i], r)
	}
	return r
}

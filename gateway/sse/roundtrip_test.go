package sse

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// expectRoundTrip is what a Reader gives back of ev after AppendEvent, and
// whether it gives back anything (AppendEvent writes nothing for an Event
// with no field). Other is not part of the round trip: it is verbatim.
func expectRoundTrip(ev tev) (tev, bool) {
	cut := func(s string) string {
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			return s[:i]
		}
		return s
	}
	lines := func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	}
	want := tev{
		Type: cut(ev.Type), ID: cut(ev.ID), Retry: cut(ev.Retry),
		Data: lines(ev.Data), Comment: lines(ev.Comment),
		HasID: ev.HasID || ev.ID != "", HasData: ev.HasData || ev.Data != "",
		HasComment: ev.HasComment || ev.Comment != "",
	}
	written := ev.Type != "" || ev.Retry != "" || want.HasID || want.HasData || want.HasComment
	return want, written
}

// checkRoundTrip encodes evs and reads them back, under every chunking.
func checkRoundTrip(t *testing.T, evs []tev) {
	t.Helper()
	var out []byte
	var want []tev
	for _, ev := range evs {
		ev.Other = ""
		out = AppendEvent(out, ev.event())
		if w, ok := expectRoundTrip(ev); ok {
			want = append(want, w)
		}
	}
	for _, c := range chunkings {
		got, err := parse(out, c, 0)
		if err != nil || !equal(got, want) {
			t.Fatalf("%s: %+v\nencoded %q\n got %+v, %v\nwant %+v", c.name, evs, out, got, err, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	checkRoundTrip(t, []tev{
		data("hello"), data(""), data("a\nb"), data("\n"), data(" lead"), data("x\r\ny\rz"),
		comment(""), comment("keep-alive"), comment(" a\n\nb"),
		{Type: "ping"}, {Type: " t", ID: "1"}, {HasID: true}, {ID: "a\nb", Type: "\nx", Retry: "5\r"},
		{Type: "error", ID: "7", Retry: "1000", Data: "{}", Comment: "c", HasData: true},
		{}, {Data: "\xEF\xBB\xBFdata: x"}, {Comment: "\xEF\xBB\xBF"},
	})
	// Random sequences over an alphabet of the bytes that matter to framing.
	const alphabet = "ab :\r\n\x00\xEF\xBB\xBFdata"
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 2000 {
		evs := make([]tev, rng.IntN(5))
		for i := range evs {
			evs[i] = tev{Type: str(), Data: str(), ID: str(), Retry: str(), Comment: str(),
				HasID: rng.IntN(2) == 0, HasData: rng.IntN(2) == 0, HasComment: rng.IntN(3) == 0}
		}
		checkRoundTrip(t, evs)
	}
}

func TestAppendEvent(t *testing.T) {
	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{Event{}, ""},
		{Event{Data: []byte("x")}, "data: x\n\n"},
		{Event{HasData: true}, "data:\n\n"},
		{Event{Data: []byte("a\n\nb")}, "data: a\ndata:\ndata: b\n\n"},
		{Event{HasComment: true}, ":\n\n"},
		{Event{Comment: []byte("keep-alive")}, ": keep-alive\n\n"},
		{Event{Type: []byte("t"), ID: []byte("1"), Retry: []byte("2"), Data: []byte("d"), Comment: []byte("c")},
			": c\nevent: t\nid: 1\nretry: 2\ndata: d\n\n"},
		{Event{Type: []byte("a\n\ndata: evil")}, "event: a\n\n"},
		{Event{Other: []byte("{\r\n\n  \"error\": 1\r}")}, "{\n  \"error\": 1\n}\n\n"},
	} {
		if got := AppendEvent([]byte("x"), tc.ev); !bytes.Equal(got, []byte("x"+tc.want)) {
			t.Errorf("AppendEvent(%+v) = %q, want %q", tc.ev, got[1:], tc.want)
		}
	}
}

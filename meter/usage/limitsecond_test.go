package usage_test

import (
	"encoding/base64"
	"encoding/binary"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// packed is LimitCountsWire's Seconds for triples of [unix delta,
// requests, tokens].
func packed(v ...int64) string {
	var raw []byte
	for _, x := range v {
		raw = binary.AppendVarint(raw, x)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

// TestLimitCountsRefusesHostileSeconds: anything with NATS access can
// publish on tollgate.limits, and every gateway adds what it reads there
// to a key's minute on each of its requests. Seconds past a minute's 60
// (a 1 MiB message held about 250,000: each admission of the key walked
// and copied them all), negative counts (which took a key past its
// limit), and seconds out of order were all taken as sent (found by
// review).
func TestLimitCountsRefusesHostileSeconds(t *testing.T) {
	many := make([]int64, 0, 3*61)
	for i := range 61 {
		many = append(many, min(int64(i), 1), 1, 1) // 61 seconds in a row
	}
	for name, w := range map[string]usage.LimitCountsWire{
		"61 seconds":          {KeyID: "key", Requests: 1, Tokens: 1, Seconds: packed(many...)},
		"negative requests":   {KeyID: "key", Requests: 1, Tokens: 1, Seconds: packed(1_800_000_000, -1000, 0)},
		"negative tokens":     {KeyID: "key", Requests: 1, Tokens: 1, Seconds: packed(1_800_000_000, 1, -1_000_000)},
		"a second repeated":   {KeyID: "key", Requests: 1, Tokens: 1, Seconds: packed(1_800_000_000, 1, 1, 0, 1, 1)},
		"a second earlier":    {KeyID: "key", Requests: 1, Tokens: 1, Seconds: packed(1_800_000_000, 1, 1, -5, 1, 1)},
		"negative open":       {KeyID: "key", Open: -100},
		"negative sum":        {KeyID: "key", Requests: -100},
		"negative tokens sum": {KeyID: "key", Tokens: -100},
	} {
		if c, err := w.Counts(); err == nil {
			t.Errorf("%s: read as %+v, no error", name, c)
		}
	}
	// What a gateway sends reads back as it was.
	want := usage.LimitCounts{KeyID: "key", Requests: 3, Tokens: 9, Open: 1, Seq: 4, Partial: true, Seconds: []usage.LimitSecond{
		{Unix: 1_800_000_000, Requests: 1, Tokens: 4}, {Unix: 1_800_000_059, Requests: 2, Tokens: 5}}}
	for i := 2; len(want.Seconds) < 60; i++ {
		want.Seconds = append(want.Seconds, usage.LimitSecond{Unix: 1_800_000_059 + int64(i), Requests: 1})
	}
	got, err := want.Wire().Counts()
	if err != nil || len(got.Seconds) != 60 || got.Seconds[1] != want.Seconds[1] || got.Seconds[59] != want.Seconds[59] ||
		!got.Partial || got.Seq != 4 || got.Open != 1 {
		t.Fatalf("60 seconds read back as %+v (%v)", got, err)
	}
}

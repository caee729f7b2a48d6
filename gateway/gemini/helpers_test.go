package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/fixture"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// geminiFixtures returns the fixture folder and the recorded gemini/
// streams with their expectations. Missing fixtures fail.
func geminiFixtures(tb testing.TB) (string, []fixture.Recording) {
	tb.Helper()
	dir, recs, err := fixture.Recordings("gemini")
	if err != nil {
		tb.Fatal(err)
	}
	return dir, recs
}

func readFixture(tb testing.TB, dir, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// events reads every event of stream, calling fn for each.
func events(tb testing.TB, stream []byte, fn func(ev *sse.Event)) {
	tb.Helper()
	rd := sse.NewReader(bytes.NewReader(stream))
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			tb.Fatal(err)
		}
		fn(&ev)
	}
}

// tapStream runs stream through a Tap.
func tapStream(tb testing.TB, stream []byte) *tap.Report {
	tb.Helper()
	var t Tap
	r := new(tap.Report)
	events(tb, stream, func(ev *sse.Event) { t.Event(ev, r) })
	return r
}

// translateStream runs stream through Chat.NewStream, returning the
// payloads and the report.
func translateStream(tb testing.TB, stream []byte) ([][]byte, *tap.Report) {
	tb.Helper()
	s := Chat{}.NewStream("chatcmpl-1", "gemini-test", 1700000000)
	r := new(tap.Report)
	var out [][]byte
	events(tb, stream, func(ev *sse.Event) { out = s.Event(ev, r, out) })
	return s.(provider.ChunkStreamEnd).End(r, out), r
}

func estimator(tb testing.TB) *tap.Estimator {
	tb.Helper()
	est, err := tap.NewEstimator()
	if err != nil {
		tb.Fatal(err)
	}
	return est
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		tb.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatalf("%v: %s", err, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

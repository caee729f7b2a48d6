package gateway_test

import (
	"testing"
	"time"
)

// TestAnOwedEventIsNotSharedWithItsRequest (run it with -race): an event
// the sink refused (NATS not answering, the spool's disk full) was held
// for another publish as the request's own event, the one its exchange
// goes on reading (the usage chunk it sends, reportedAsBilled, the spend
// hold's charge), while the server's background loop published it again,
// and the sink normalizes an event in place as it publishes: every string
// field and the corrections rewritten on one goroutine while the request's
// read them on another (a data race; a torn string read can crash the
// gateway).
func TestAnOwedEventIsNotSharedWithItsRequest(t *testing.T) {
	owingRequest(t, 200*time.Millisecond, nil,
		`{"model":"sim-small","stream":true,"stream_options":{"include_usage":true},"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	time.Sleep(2500 * time.Millisecond) // rounds of offers of the owed events
}

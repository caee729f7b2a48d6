package gateway_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestARefusedAttemptEventIsPublishedOnceTheSinkRecovers: the event of an
// attempt that failed and was retried on another deployment (the
// operator's cost, DESIGN.md invariant 1) is owed like the served one's
// when the sink refuses it: offered again every second, and published once
// the sink takes events again, not left in the crash journal until the
// next start.
func TestARefusedAttemptEventIsPublishedOnceTheSinkRecovers(t *testing.T) {
	st := failoverStack(t, nil)
	st.sink.setFail(errSpoolRefused)
	st.setFaults(t, "east", `{"fail_next":1,"status":500}`)
	st.setFaults(t, "west", `{"fail_next":1,"status":500}`)
	resp := st.post(t, "/v1/chat/completions", `{"model":"smart","messages":[{"role":"user","content":"hi there"}]}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("X-Request-Id")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if calls := st.journal.of(id); len(calls) > 0 && calls[len(calls)-1] == "fail" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal calls for a request whose event the sink refused: %v", st.journal.of(id))
		}
	}
	if n := st.sink.count(); n != 0 {
		t.Fatalf("%d events published while the sink refused them", n)
	}
	// Each refused event's journal entry stays open until it is published:
	// ended before, a crash now would lose it.
	if ended := endedUnpublished(st.journal); len(ended) > 0 {
		t.Fatalf("events journaled as failed, then ended while the sink refused them: %v", ended)
	}
	st.sink.setFail(nil)
	if e := st.sink.event(t, id); e.NotCharged || e.Deployment != "spare" {
		t.Errorf("served attempt %+v", e)
	}
	for _, d := range []string{"east", "west"} {
		e := st.sink.eventWhere(t, "the failed attempt on "+d, func(e *usage.Event) bool {
			return e.RequestID == id && e.Deployment == d
		})
		if !e.NotCharged || e.Status != usage.StatusUpstreamError {
			t.Errorf("failed attempt on %s: %+v", d, e)
		}
	}
}

// endedUnpublished returns the ids j ended after journaling their final
// event as failed (the sink refused it), in the order of the ends.
func endedUnpublished(j *memJournal) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	failed := map[string]bool{}
	var ended []string
	for _, c := range j.calls {
		kind, rest, _ := strings.Cut(c, " ")
		id, _, _ := strings.Cut(rest, " ")
		switch kind {
		case "fail":
			failed[id] = true
		case "end":
			if failed[id] {
				ended = append(ended, id)
			}
		}
	}
	return ended
}

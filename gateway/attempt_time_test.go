package gateway_test

import (
	"io"
	"testing"
)

// TestFailoverChargedAtArrival: a request that fails over is charged at
// the time the gateway received it (usage.Event.Time: "when the gateway
// received the request … places the event in its billing period and
// selects the price version"), not at the start of the attempt that
// served it. Dated at its last attempt, a request that arrived at
// 23:59:59 on the 31st and was retried (up to retry.budget, 30 s, later)
// was billed in the next month, at the next price version, and counted
// in the next day's spend limit, while its hold and its currency check
// were made at its arrival.
func TestFailoverChargedAtArrival(t *testing.T) {
	st := failoverStack(t, nil)
	knobs := `{"fail_next":1,"status":500}`
	st.setFaults(t, "east", knobs)
	st.setFaults(t, "west", knobs)
	resp := st.post(t, "/v1/chat/completions", `{"model":"smart","messages":[{"role":"user","content":"hi there"}]}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("X-Request-Id")
	served := st.sink.event(t, id)
	evs := st.sink.eventsOf(id)
	if len(evs) != 3 || served.Attempt != 3 || served.NotCharged {
		t.Fatalf("events %+v, want two failed attempts and the served third", evs)
	}
	for _, e := range evs {
		if !e.Time.Equal(evs[0].Time) {
			t.Errorf("attempt %d dated %s, the request's first attempt %s: every attempt of one request is dated at its arrival",
				e.Attempt, e.Time.Format("15:04:05.000000"), evs[0].Time.Format("15:04:05.000000"))
		}
	}
}

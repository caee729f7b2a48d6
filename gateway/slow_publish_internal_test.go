package gateway

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// BenchmarkJournalIfSlow: what commit's guard of a slow publish costs a
// request whose publish is fast (a timer armed and stopped, the event
// copied), against the baseline of journaling the event at every commit
// instead (Journal.Fail then End on a real journal, what a kill in the
// PubAck's wait needs journaled), in the same run.
func BenchmarkJournalIfSlow(b *testing.B) {
	e := &usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: uuid.NewString(),
		KeyID: uuid.NewString(), Provider: "p", Model: "m", Endpoint: "/v1/chat/completions",
		Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 12, CompletionTokens: 40}}
	j, _, err := journal.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = j.Close() })
	b.Run("timer", func(b *testing.B) {
		x := &exchange{s: &Server{journal: j}}
		for b.Loop() {
			x.published(x.journalIfSlow(e))
			x.pubDone = false
		}
	})
	b.Run("journal-every-commit", func(b *testing.B) {
		for b.Loop() {
			j.Fail(e)
			j.End(e.ID)
		}
	})
}

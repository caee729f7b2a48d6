package meter

import (
	"context"
	"time"
)

// Restart restarts e's server as heal does after a store failed: refusing
// a server that did not load all its store holds unless lenient.
func (e *Embedded) Restart(lenient bool) error { return e.restart(lenient) }

// Trimmable is trimmable: whether a server of this version has its usage
// stream trimmed.
var Trimmable = trimmable

// SetAside is (*Worker).setAside: m to the dead-letter stream with reason, then acknowledged.
var SetAside = (*Worker).setAside

// WithPullExpiry returns c with its subscription's pull requests lasting d
// (its heartbeats every d/2), so that a test sees a consumer that stops
// answering within seconds.
func WithPullExpiry(c WorkerConfig, d time.Duration) WorkerConfig {
	c.pullExpiry = d
	return c
}

// PublishBatch is (*Publisher).publishBatch of the encoded events datas
// under ids: one message for them all when there are several (a group),
// and each event's outcome.
func (p *Publisher) PublishBatch(ctx context.Context, ids []string, datas [][]byte) []error {
	batch := make([]*groupWaiter, len(ids))
	for i := range ids {
		batch[i] = &groupWaiter{id: ids[i], data: datas[i]}
	}
	return p.publishBatch(ctx, batch)
}

// MaxGroupEvents is maxGroupEvents, the most events a group may hold.
const MaxGroupEvents = maxGroupEvents

// SetHandOverNoProgress sets how long HandOver resends without any message
// acknowledged before it gives up, and returns what restores it.
func SetHandOverNoProgress(d time.Duration) (restore func()) {
	was := handOverNoProgress
	handOverNoProgress = d
	return func() { handOverNoProgress = was }
}

// CutNote is cutNote, the note a dead letter's reason ends in when its
// data was cut.
const CutNote = cutNote

// SetReplayPage sets how many dead letters Replay reads at a time when it
// replays every one, and returns what restores it.
func SetReplayPage(n int) (restore func()) {
	was := replayPage
	replayPage = n
	return func() { replayPage = was }
}

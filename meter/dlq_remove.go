package meter

// How an operator drops a dead letter for good: DLQ.Remove.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// SetLog sets the logger Remove records each removed dead letter on, and
// a replay of every dead letter its progress (slog.Default until it is
// called). Call it before the DLQ is shared.
func (d *DLQ) SetLog(log *slog.Logger) { d.log = log }

// logger is the logger SetLog set, or slog.Default.
func (d *DLQ) logger() *slog.Logger {
	if d.log == nil {
		return slog.Default()
	}
	return d.log
}

// maxRemovedLog is the most of a removed dead letter's data, in bytes,
// that Remove's log line keeps: an event's JSON is well under it, and a
// group set aside whole (up to 512 KiB) would flood the log.
const maxRemovedLog = 4 << 10

// Remove deletes the dead letters with the given sequences from the
// dead-letter stream, without sending them back: their usage is dropped
// from billing for good (a letter Replay refuses, say, whose events the
// operator recovered by hand from its data). It returns how many it
// removed; no sequences removes none.
//
// Every sequence is checked before any letter is removed, and then none
// is: one the stream does not hold (never set aside, replayed or removed
// already) is a *NoDeadLetterError. Each letter removed is logged at WARN
// with its sequence, time, event id, reason and data (its first 4 KiB,
// and its length in bytes): that line is what remains of it.
func (d *DLQ) Remove(ctx context.Context, seqs []uint64) (int, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	s, err := d.js.Stream(ctx, DLQStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) { // deleted by hand: no dead letters (List)
		return 0, &NoDeadLetterError{Seq: slices.Min(seqs)}
	}
	if err != nil {
		return 0, err
	}
	ms, err := namedLetters(ctx, s, seqs)
	if err != nil {
		return 0, err
	}
	log := d.logger()
	for i, m := range ms {
		if err := deleteLetter(ctx, s, m.Sequence); err != nil { // not found: replayed or removed meanwhile
			return i, fmt.Errorf("remove dead letter %d: %w", m.Sequence, err)
		}
		data := m.Data
		if len(data) > maxRemovedLog {
			data = data[:maxRemovedLog]
		}
		// When it was set aside is dead_lettered_at: "time" is the JSON record's own.
		log.WarnContext(ctx, "dead letter removed: its usage is dropped from billing for good",
			"seq", m.Sequence, "dead_lettered_at", m.Time, "event_id", m.Header.Get(HeaderEventID), "reason", m.Header.Get(HeaderReason),
			"data", strings.ToValidUTF8(string(data), "\uFFFD"), "data_bytes", len(m.Data))
	}
	return len(ms), nil
}

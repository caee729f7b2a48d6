package meter

// How a dead letter goes back to the usage stream: DLQ.Replay.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NoDeadLetterError is Replay's and Remove's answer for a sequence the
// dead-letter stream does not hold: never set aside, or replayed or
// removed already.
type NoDeadLetterError struct{ Seq uint64 }

// Error names the sequence not found.
func (e *NoDeadLetterError) Error() string {
	return fmt.Sprintf("dead letter %d not found: never set aside, or replayed or removed already; tollgate dlq list (GET /admin/v1/dlq) lists the ones held", e.Seq)
}

// NotFound reports true: the admin API answers the error as not found.
func (e *NoDeadLetterError) NotFound() bool { return true }

// UnreplayableError is Replay's answer for a dead letter it cannot send
// back: a group set aside whole (a malformed group) whose data was cut to
// 512 KiB, its last event not whole, or that holds more events than a
// group may (16). Seq is the letter's sequence, Why says which.
type UnreplayableError struct {
	Seq uint64
	Why string
}

// Error names the sequence and why.
func (e *UnreplayableError) Error() string {
	return fmt.Sprintf("dead letter %d cannot be replayed: %s", e.Seq, e.Why)
}

// Conflict reports true: the admin API answers the error as a conflict
// (the letter, not the request, is at fault).
func (e *UnreplayableError) Conflict() bool { return true }

// Replay sends dead letters back to the usage stream (after the cause was
// fixed) and removes them from the dead-letter stream: those with the
// given sequences, or all of them when seqs is empty. It returns how many
// dead letters it replayed (a group counts one, whatever its events). The
// ledger drops any event that was stored meanwhile.
//
// A dead letter goes back as one message, its data as it is, but for a
// group the worker set aside whole (a malformed group: its reason begins
// "malformed group: "), which goes back as its events: each line that is
// not blank a message of its own, which the worker writes or sets aside
// again on its own, and nothing for blank lines (the letter is removed).
// Sent back whole without its header, the worker read the group as one
// event and set it aside again, so that its events never reached the
// ledger.
//
// Each message's Nats-Msg-Id is "<event id>-replay-<seq>-<time>" (the
// letter's sequence and time, in Unix ns), "-<line>" added for a group's
// line (its index in the data, from 0), so that JetStream's duplicate
// window drops a replay of the same letter again (after a crash before its
// removal) and nothing else. The event id is the letter's
// Tollgate-Event-Id, sent along as such; for a group's line, the id its
// JSON gives (lineID), sent along as such when there is one (else the
// letter's, or the stream's name, stands in the Nats-Msg-Id alone).
//
// Every letter is checked before any is sent, and then none is replayed:
// a sequence given that the stream does not hold is a *NoDeadLetterError,
// and a group that cannot be replayed as its events (cut to 512 KiB, its
// last line not whole; more than 16 events) an *UnreplayableError, seqs
// given or not: its events are recovered by hand from its data (List), and
// the letter removed with Remove (`tollgate dlq remove`).
//
// With seqs empty, the letters held when it begins are replayed (those set
// aside meanwhile wait for the next replay), read a page at a time and
// logged as it goes, so that a dead-letter stream of any size replays in
// bounded memory.
func (d *DLQ) Replay(ctx context.Context, seqs []uint64) (int, error) {
	return d.ReplayProgress(ctx, seqs, nil)
}

// ReplayProgress is Replay, calling progress (when not nil) with the
// dead letters replayed so far and how many it replays in all, once they
// are all checked and then after each letter: a replay of an outage's
// letters takes minutes (about 1,000 letters a second), and its caller
// could show nothing of it.
func (d *DLQ) ReplayProgress(ctx context.Context, seqs []uint64, progress func(done, total int)) (int, error) {
	if progress == nil {
		progress = func(int, int) {}
	}
	s, err := d.js.Stream(ctx, DLQStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) { // deleted by hand: no dead letters (List)
		if len(seqs) > 0 {
			return 0, &NoDeadLetterError{Seq: slices.Min(seqs)}
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(seqs) == 0 {
		return d.replayAll(ctx, s, progress)
	}
	ms, err := namedLetters(ctx, s, seqs)
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		if _, err := d.replayMsgs(m); err != nil {
			return 0, err
		}
	}
	progress(0, len(ms))
	return d.replayLetters(ctx, s, ms, func(n int) { progress(n, len(ms)) })
}

// replayPage is how many dead letters Replay holds at once when it
// replays every one (at most 32 MiB of data): a dead-letter stream has no
// limit, and a letter is up to 512 KiB, so that reading them all first
// held the whole stream in the admin process (300 letters of 500 KiB: a
// heap peak of 253 MiB, against 58 MiB a page of 16 at a time).
var replayPage = 64

// replayProgress is how often a replay of every dead letter logs how far
// it is.
const replayProgress = 10 * time.Second

// replayAll replays every dead letter the stream holds when it begins
// (those set aside meanwhile wait for the next replay), a page at a time.
// It checks every one first, reading them one by one and keeping none,
// so that one it cannot replay still stops the replay before any is sent;
// a letter is never changed once stored, so the check holds for the
// second reading.
func (d *DLQ) replayAll(ctx context.Context, s jetstream.Stream, progress func(done, total int)) (int, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	if info.State.Msgs == 0 {
		return 0, nil
	}
	first, last := info.State.FirstSeq, info.State.LastSeq
	total := 0
	for seq := first; seq <= last; {
		ms, err := lettersFrom(ctx, s, seq, last, 1)
		if err != nil || len(ms) == 0 {
			if err != nil {
				return 0, err
			}
			break
		}
		if _, err := d.replayMsgs(ms[0]); err != nil {
			return 0, err
		}
		total++
		seq = ms[0].Sequence + 1
	}
	progress(0, total)
	n, logged := 0, time.Now()
	for seq := first; seq <= last; {
		ms, err := lettersFrom(ctx, s, seq, last, replayPage)
		if err != nil {
			return n, err
		}
		if len(ms) == 0 {
			break
		}
		base := n
		done, err := d.replayLetters(ctx, s, ms, func(k int) { progress(base+k, total) })
		n += done
		if err != nil {
			return n, err
		}
		if time.Since(logged) >= replayProgress {
			logged = time.Now()
			d.logger().Info("replaying every dead letter", "replayed", n, "through_seq", ms[len(ms)-1].Sequence, "last_seq", last)
		}
		seq = ms[len(ms)-1].Sequence + 1
	}
	return n, nil
}

// replayLetters sends each of ms back (checked already: replayMsgs) and
// removes it, in order, calling replayed with the count after each; it
// returns how many it replayed and removed. A letter another replay or
// removal removed meanwhile is not counted, and not an error.
func (d *DLQ) replayLetters(ctx context.Context, s jetstream.Stream, ms []*jetstream.RawStreamMsg, replayed func(int)) (int, error) {
	n := 0
	for _, m := range ms {
		sends, err := d.replayMsgs(m)
		if err != nil {
			return n, err
		}
		for _, msg := range sends {
			if _, err := d.js.PublishMsg(ctx, msg); err != nil {
				return n, fmt.Errorf("replay dead letter %d: %w", m.Sequence, err)
			}
		}
		var nf *NoDeadLetterError
		switch err := deleteLetter(ctx, s, m.Sequence); {
		case errors.As(err, &nf):
			// Another replay (or a removal) took it meanwhile: a replay
			// sent it under the same Nats-Msg-Ids, which JetStream
			// dropped, and counts it; this one goes on with the rest.
			continue
		case err != nil:
			return n, fmt.Errorf("remove replayed dead letter %d: %w", m.Sequence, err)
		}
		n++
		replayed(n)
	}
	return n, nil
}

// replayMsgs returns the messages that send dead letter m back to the
// usage stream (see Replay), or an *UnreplayableError.
func (d *DLQ) replayMsgs(m *jetstream.RawStreamMsg) ([]*nats.Msg, error) {
	reason, id := m.Header.Get(HeaderReason), m.Header.Get(HeaderEventID)
	// A new Nats-Msg-Id, so JetStream's window does not drop the replay;
	// the ledger's key still holds. It names this dead letter by its
	// sequence and time (a dead-letter stream made again numbers from 1
	// again), so that only a replay of this same letter again (a crash
	// before its removal) is dropped. The event id goes along, for a dead
	// letter of the replay to name the event.
	replay := "-replay-" + strconv.FormatUint(m.Sequence, 10) + "-" + strconv.FormatInt(m.Time.UnixNano(), 10)
	if !strings.HasPrefix(reason, malformedGroup) {
		msg := nats.NewMsg(d.subject)
		msg.Data = m.Data
		if id != "" {
			msg.Header.Set(nats.MsgIdHdr, id+replay)
			msg.Header.Set(HeaderEventID, id)
		}
		return []*nats.Msg{msg}, nil
	}
	if wasCut(reason) {
		return nil, &UnreplayableError{Seq: m.Sequence, Why: "a group set aside whole, cut to its first " +
			strconv.Itoa(len(m.Data)) + " bytes, so its last event is not whole"}
	}
	var out []*nats.Msg
	data := m.Data
	for i := 0; len(data) > 0; i++ {
		line := data
		if j := bytes.IndexByte(data, '\n'); j >= 0 {
			line, data = data[:j], data[j+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(out) == maxGroupEvents {
			// As the worker bounds what it splits: a letter of 512 KiB
			// of short lines would otherwise go back as many thousand
			// messages, each set aside again alone.
			return nil, &UnreplayableError{Seq: m.Sequence, Why: fmt.Sprintf(
				"a group set aside whole holding more than %d events, the most a group holds", maxGroupEvents)}
		}
		msg := nats.NewMsg(d.subject)
		msg.Data = line
		lid := lineID(line)
		if len(lid) > maxDeadLetterEventID { // as put keeps it
			lid = strings.ToValidUTF8(lid[:maxDeadLetterEventID], "")
		}
		name := cmp.Or(lid, id, DLQStream) // any: the rest of the id is unique
		msg.Header.Set(nats.MsgIdHdr, name+replay+"-"+strconv.Itoa(i))
		if lid != "" {
			msg.Header.Set(HeaderEventID, lid)
		}
		out = append(out, msg)
	}
	return out, nil
}

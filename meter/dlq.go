package meter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Dead-letter stream names and headers.
const (
	DLQStream  = "TOLLGATE_USAGE_DLQ"
	DLQSubject = "tollgate.usage.dlq"
	// HeaderReason says why a message was set aside.
	HeaderReason = "Tollgate-Reason"
	// HeaderEventID is the event id (text, a UUID for a valid event) of a
	// dead letter, and of a replayed one back on the usage stream, whose
	// Nats-Msg-Id is then not the event id: a replay set aside again keeps
	// the event's id.
	HeaderEventID = "Tollgate-Event-Id"
)

// DLQ is the dead-letter stream of the usage pipeline.
type DLQ struct {
	js      jetstream.JetStream
	cfg     StreamConfig // the usage stream's: its subject is where replayed events go
	subject string       // where replayed events go
	log     *slog.Logger // where Remove records what it removed (SetLog); nil: slog.Default
}

// EnsureDLQ creates (or updates) the dead-letter stream: file storage,
// kept until replayed or removed by an operator, with cfg.Replicas or, when
// the stream has more, the stream's. subject is the usage
// stream's subject, where Replay sends events back.
func EnsureDLQ(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (*DLQ, error) {
	cfg.defaults()
	if err := ensureDLQStream(ctx, js, cfg); err != nil {
		return nil, err
	}
	return &DLQ{js: js, cfg: cfg, subject: cfg.Subject}, nil
}

// ensureDLQStream creates (or updates) the dead-letter stream for the
// usage stream of cfg (defaults applied).
func ensureDLQStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	// Its replicas are never lowered, as the usage stream's (EnsureStream):
	// a `tollgate admin` started without --config (meter.replicas 1)
	// scaled an R3 dead-letter stream down to one copy (a review).
	switch old, err := js.Stream(ctx, DLQStream); {
	case err == nil:
		cfg.Replicas = max(cfg.Replicas, old.CachedInfo().Config.Replicas)
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("dead-letter stream: %w", err)
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: DLQStream, Description: "Tollgate usage events set aside by the meter worker, with the reason",
		Subjects: []string{DLQSubject}, Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
		Duplicates: cfg.DuplicateWindow, // a dead letter sent again (put's msgID) is dropped within it
		// No limit; one an operator sets discards the oldest dead letters
		// (DiscardOld, JetStream's default): refusing new ones instead
		// held every worker at the first it could not set aside, and so
		// all metering (a review).
	})
	if err != nil {
		return fmt.Errorf("dead-letter stream: %w", err)
	}
	return nil
}

// maxDeadLetter is the most of a message's data a dead letter keeps: a
// message NATS refused as too large (a spool record, say) is kept in part,
// under NATS' default max_payload of 1 MiB.
const maxDeadLetter = 512 << 10

// maxDeadLetterEventID is the most of a message's event id (its
// Nats-Msg-Id) a dead letter keeps in its Tollgate-Event-Id header: an
// event id is a UUID, 36 bytes, and JetStream refuses a message whose
// headers pass 64 KiB, which a publisher's own outsized id, copied beside
// the reason, would.
const maxDeadLetterEventID = 256

// put sets data (a usage event message, with its event id when known)
// aside with reason, waiting for the PubAck. Data beyond maxDeadLetter
// (or what the server's max_payload leaves it: keep), and an event id
// beyond maxDeadLetterEventID, are cut, and the reason says so. msgID names this setting aside (its
// source: a usage stream message, a spool record), so that sending it
// again (a redelivery, a drain resumed from an older cursor after a kill)
// is dropped by the stream's duplicate window rather than set aside twice;
// a replayed event set aside again comes from a new source, and is kept.
// When no stream takes the dead-letter subject (an operator deleted the
// dead-letter stream), put makes the stream again and publishes once more:
// without it every dead letter would wait, and the events behind it too,
// until the worker was restarted.
func (d *DLQ) put(ctx context.Context, data []byte, eventID, reason, msgID string) error {
	msg := nats.NewMsg(DLQSubject)
	if len(eventID) > maxDeadLetterEventID {
		reason += fmt.Sprintf(" (its %d-byte message id is cut to its first %d in Tollgate-Event-Id)", len(eventID), maxDeadLetterEventID)
		eventID = strings.ToValidUTF8(eventID[:maxDeadLetterEventID], "")
	}
	if keep := d.keep(len(reason) + len(eventID) + len(msgID)); len(data) > keep {
		reason += fmt.Sprintf(cutNote, len(data), keep)
		data = data[:keep]
	}
	msg.Data = data
	msg.Header.Set(HeaderReason, reason)
	if eventID != "" {
		msg.Header.Set(HeaderEventID, eventID)
	}
	if msgID != "" {
		msg.Header.Set(nats.MsgIdHdr, msgID)
	}
	_, err := d.js.PublishMsg(ctx, msg)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		if err := ensureDLQStream(ctx, d.js, d.cfg); err != nil {
			return err
		}
		_, err = d.js.PublishMsg(ctx, msg)
	}
	return err
}

// cutNote ends the reason of a dead letter whose data put cut: the
// message's bytes, and those kept.
const cutNote = " (the message's %d bytes are cut to its first %d here)"

// wasCut reports whether a dead letter's reason ends in put's cutNote.
func wasCut(reason string) bool {
	i := strings.LastIndex(reason, " (the message's ")
	if i < 0 {
		return false
	}
	var from, to int
	if _, err := fmt.Sscanf(reason[i:], cutNote, &from, &to); err != nil {
		return false
	}
	return reason[i:] == fmt.Sprintf(cutNote, from, to)
}

// deadLetterHeaders is room, in bytes, for a dead letter's headers beside
// their values (the names, the framing) and for the note on a cut that
// put adds to the reason.
const deadLetterHeaders = 256

// keep is the most of a message's data a dead letter keeps: maxDeadLetter,
// or less when the server's max_payload, which counts the headers too, is
// smaller; values is the bytes of the headers' values. Cut only past
// maxDeadLetter, a message over a max_payload set below 512 KiB (an event
// the gateway could not publish for its size) was refused here too, and
// waited in the dead-letter spool for good, with the records behind it.
func (d *DLQ) keep(values int) int {
	keep := maxDeadLetter
	if nc := d.js.Conn(); nc != nil && nc.MaxPayload() > 0 {
		keep = min(keep, int(nc.MaxPayload())-values-deadLetterHeaders)
	}
	return max(keep, 0)
}

// List returns up to limit dead letters, oldest first, from the first one
// after sequence after (0: from the oldest). A page goes on from the last
// sequence of the page before it, held or not: a letter replayed or
// removed since costs nothing, and none is listed twice. After the last
// letter it returns none, without an error.
func (d *DLQ) List(ctx context.Context, after uint64, limit int) ([]usage.DeadLetter, error) {
	s, err := d.js.Stream(ctx, DLQStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Deleted by hand, and not yet made again by a dead letter (put):
		// it holds none.
		return []usage.DeadLetter{}, nil
	}
	if err != nil {
		return nil, err
	}
	ms, err := letters(ctx, s, after, limit)
	out := make([]usage.DeadLetter, 0, len(ms))
	for _, m := range ms {
		out = append(out, usage.DeadLetter{Seq: m.Sequence, Time: m.Time, Reason: m.Header.Get(HeaderReason),
			EventID: m.Header.Get(HeaderEventID), Data: string(m.Data)})
	}
	return out, err
}

// letters returns up to limit messages of the dead-letter stream s after
// sequence after, oldest first: those read before an error too.
func letters(ctx context.Context, s jetstream.Stream, after uint64, limit int) ([]*jetstream.RawStreamMsg, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	if info.State.Msgs == 0 || after >= info.State.LastSeq {
		return nil, nil
	}
	return lettersFrom(ctx, s, max(info.State.FirstSeq, after+1), info.State.LastSeq, limit)
}

// namedLetters returns the dead letters of s with the sequences seqs, in
// order, each once, or a *NoDeadLetterError for the first one s does not
// hold.
func namedLetters(ctx context.Context, s jetstream.Stream, seqs []uint64) ([]*jetstream.RawStreamMsg, error) {
	var ms []*jetstream.RawStreamMsg
	for _, seq := range slices.Compact(slices.Sorted(slices.Values(seqs))) {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, &NoDeadLetterError{Seq: seq}
		}
		if err != nil {
			return nil, fmt.Errorf("dead letter %d: %w", seq, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// deleteLetter removes dead letter seq from s. It returns a
// *NoDeadLetterError when the letter was not there to remove: replayed or
// removed meanwhile by another replay or removal (two operators, or a
// retry beside the first run). JetStream answers the delete of a missing
// message with a server error (err_code 10057, "no message found") that
// does not wrap jetstream.ErrMsgNotFound, so the letter is looked up to
// tell.
func deleteLetter(ctx context.Context, s jetstream.Stream, seq uint64) error {
	err := s.DeleteMsg(ctx, seq)
	if err == nil {
		return nil
	}
	if _, gerr := s.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
		return &NoDeadLetterError{Seq: seq}
	}
	return err
}

// lettersFrom returns up to limit dead letters of s from sequence seq
// through last, oldest first.
func lettersFrom(ctx context.Context, s jetstream.Stream, seq, last uint64, limit int) ([]*jetstream.RawStreamMsg, error) {
	var out []*jetstream.RawStreamMsg
	// Each request asks for the next letter present at or after seq, so
	// that the letters replayed (deleted) between them cost nothing.
	for seq <= last && len(out) < limit {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(DLQSubject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, err
		}
		if m.Sequence > last {
			break
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
	return out, nil
}

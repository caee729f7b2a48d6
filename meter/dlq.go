package meter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EventError is a Store's refusal of one event of a batch for a reason
// retrying cannot fix (its cost overflows, say). The worker sets that event
// aside in the dead-letter stream and writes the rest.
type EventError struct {
	ID     string
	Reason string
}

func (e *EventError) Error() string { return "event " + e.ID + ": " + e.Reason }

// Dead-letter stream names and headers.
const (
	DLQStream  = "TOLLGATE_USAGE_DLQ"
	DLQSubject = "tollgate.usage.dlq"
	// HeaderReason says why a message was set aside.
	HeaderReason = "Tollgate-Reason"
)

// DeadLetter is a usage event message set aside, with why.
type DeadLetter struct {
	// Seq is its sequence in the dead-letter stream: what replay takes.
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
	// EventID is the message's Nats-Msg-Id (the event id, when it had one).
	EventID string `json:"event_id,omitempty"`
	Data    string `json:"data"`
}

// DLQ is the dead-letter stream of the usage pipeline.
type DLQ struct {
	js      jetstream.JetStream
	subject string // where replayed events go
}

// EnsureDLQ creates (or updates) the dead-letter stream: file storage,
// kept until replayed or removed by an operator. subject is the usage
// stream's subject, where Replay sends events back.
func EnsureDLQ(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (*DLQ, error) {
	cfg.defaults()
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: DLQStream, Description: "Tollgate usage events set aside by the meter worker, with the reason",
		Subjects: []string{DLQSubject}, Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	return &DLQ{js: js, subject: cfg.Subject}, nil
}

// put sets a message aside with reason, waiting for the PubAck.
func (d *DLQ) put(ctx context.Context, m jetstream.Msg, reason string) error {
	msg := nats.NewMsg(DLQSubject)
	msg.Data = m.Data()
	msg.Header.Set(HeaderReason, reason)
	if id := m.Headers().Get(nats.MsgIdHdr); id != "" {
		msg.Header.Set("Tollgate-Event-Id", id)
	}
	_, err := d.js.PublishMsg(ctx, msg)
	return err
}

// List returns up to limit dead letters, oldest first.
func (d *DLQ) List(ctx context.Context, limit int) ([]DeadLetter, error) {
	s, err := d.js.Stream(ctx, DLQStream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	out := []DeadLetter{}
	if info.State.Msgs == 0 {
		return out, nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && len(out) < limit; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, DeadLetter{Seq: m.Sequence, Time: m.Time, Reason: m.Header.Get(HeaderReason),
			EventID: m.Header.Get("Tollgate-Event-Id"), Data: string(m.Data)})
	}
	return out, nil
}

// Replay sends dead letters back to the usage stream (after the cause was
// fixed) and removes them from the dead-letter stream: those with the
// given sequences, or all of them when seqs is empty. It returns how many
// it replayed. The ledger drops any that were stored meanwhile.
func (d *DLQ) Replay(ctx context.Context, seqs []uint64) (int, error) {
	if len(seqs) == 0 {
		all, err := d.List(ctx, 1<<30)
		if err != nil {
			return 0, err
		}
		for _, l := range all {
			seqs = append(seqs, l.Seq)
		}
	}
	s, err := d.js.Stream(ctx, DLQStream)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, seq := range seqs {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			return n, fmt.Errorf("dead letter %d: %w", seq, err)
		}
		msg := nats.NewMsg(d.subject)
		msg.Data = m.Data
		if id := m.Header.Get("Tollgate-Event-Id"); id != "" {
			// A new Nats-Msg-Id, so JetStream's window does not drop the
			// replay; the ledger's key still holds.
			msg.Header.Set(nats.MsgIdHdr, id+"-replay-"+strconv.FormatUint(seq, 10))
		}
		if _, err := d.js.PublishMsg(ctx, msg); err != nil {
			return n, fmt.Errorf("replay dead letter %d: %w", seq, err)
		}
		if err := s.DeleteMsg(ctx, seq); err != nil {
			return n, fmt.Errorf("remove replayed dead letter %d: %w", seq, err)
		}
		n++
	}
	return n, nil
}

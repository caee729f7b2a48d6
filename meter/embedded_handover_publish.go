package meter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// outgoing is a message of the embedded store as it is handed over, with
// its sequence there (for the errors that name it).
type outgoing struct {
	seq uint64
	msg *nats.Msg
}

// String names m for an operator: its sequence in the embedded store, its
// Nats-Msg-Id (a usage event's id) and a dead letter's event id, and its
// size, headers included.
func (m outgoing) String() string {
	s := fmt.Sprintf("message %d of the embedded store (Nats-Msg-Id %s", m.seq, m.msg.Header.Get(nats.MsgIdHdr))
	if id := m.msg.Header.Get(HeaderEventID); id != "" {
		s += ", event " + id
	}
	size := len(m.msg.Data)
	for k, vs := range m.msg.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4 // "k: v\r\n"
		}
	}
	return fmt.Sprintf("%s, about %d bytes)", s, size)
}

// handOverNoProgress is how long HandOver keeps sending again messages
// that are not acknowledged while none is (a variable for the tests): what
// clears by itself clears well within it (a JetStream leader election
// takes seconds, a NATS restart or a client's reconnection tens of
// seconds), and past it the hand-over fails with the last error, so that
// the caller logs why and tries again later (cmd/tollgate: /readyz says
// "failed ... trying again at"), instead of sending in silence for ever.
// It is longer than the PubAck timeout (10 s) with the waits between the
// resends (1 s doubling up to 10 s) several times over.
var handOverNoProgress = 2 * time.Minute

// publish sends msgs to dst and waits for the PubAck of each, sending
// again those that got none, every second and then up to every 10
// seconds. It returns how many dst dropped as duplicates. A PubAck from
// another stream than name is an error, as is a refusal that sending again
// would not change (see refusal), at once; and, after handOverNoProgress
// without any message acknowledged, the last reason of the resends.
func (h *storeMover) publish(ctx context.Context, name string, msgs []outgoing) (known int, err error) {
	wait := time.Second
	var lastErr error
	for len(msgs) > 0 {
		var failed []outgoing
		futures := make([]jetstream.PubAckFuture, len(msgs))
		for i, m := range msgs {
			f, err := h.dst.PublishMsgAsync(m.msg)
			if err != nil {
				if err := h.refusal(ctx, name, m, err); err != nil {
					return known, err
				}
				failed, lastErr = append(failed, m), err
			}
			futures[i] = f
		}
		stalled := time.NewTimer(time.Until(h.progress.Add(handOverNoProgress)))
		for i, f := range futures {
			if f == nil {
				continue
			}
			select {
			case ack := <-f.Ok():
				if ack.Stream != name {
					stalled.Stop()
					return known, fmt.Errorf("stream %s: %s was stored by stream %s on NATS, which takes subject %s too: "+
						"give that subject to %s alone", name, msgs[i], ack.Stream, msgs[i].msg.Subject, name)
				}
				if ack.Duplicate {
					known++
				}
				h.progress = time.Now()
				stalled.Reset(handOverNoProgress)
			case err := <-f.Err():
				if err := h.refusal(ctx, name, msgs[i], err); err != nil {
					stalled.Stop()
					return known, err
				}
				failed, lastErr = append(failed, msgs[i]), err
			case <-ctx.Done():
				stalled.Stop()
				return known, ctx.Err()
			case <-stalled.C:
				if lastErr == nil {
					lastErr = errors.New("no PubAck came (timeout)")
				}
				return known, h.stalled(name, msgs[i], lastErr)
			}
		}
		stalled.Stop()
		if len(failed) == 0 {
			return known, nil
		}
		left := time.Until(h.progress.Add(handOverNoProgress))
		if left <= 0 {
			return known, h.stalled(name, failed[0], lastErr)
		}
		if time.Since(h.lastWarn) >= time.Minute {
			h.lastWarn = time.Now()
			h.log.Warn("embedded store hand-over: NATS did not acknowledge messages; sending them again (repeats within a minute are not logged)",
				"stream", name, "messages", len(failed), "err", lastErr, "gives_up_in", left.Round(time.Second).String())
		}
		select {
		case <-ctx.Done():
			return known, ctx.Err()
		case <-time.After(min(wait, left)):
		}
		wait = min(2*wait, 10*time.Second)
		msgs = failed
	}
	return known, nil
}

// stalled is the error of a hand-over that got no message acknowledged for
// handOverNoProgress, m among those waiting, err the last reason.
func (h *storeMover) stalled(name string, m outgoing, err error) error {
	return fmt.Errorf("stream %s: no message acknowledged by NATS for %v, %s among those unacknowledged: %w", name, handOverNoProgress, m, err)
}

// refusal is the error that ends the hand-over when err, what publishing m
// to stream name got, would be got again however often m were sent: nil
// when sending it again may succeed (no PubAck in time, a stream without
// its leader for now, NATS lost for a while). It names the stream, the
// message and the cause. A refusal is:
//   - m larger than the max_payload of the NATS server (nats.ErrMaxPayload);
//   - a PubAck whose error is the stream's verdict on m against its
//     configuration and storage (refusedForGood);
//   - no responders for m's subject (jetstream.ErrNoStreamResponse) when
//     no stream on NATS takes that subject (a stream that does is between
//     leaders: sent again);
//   - the connection to NATS closed, for good.
func (h *storeMover) refusal(ctx context.Context, name string, m outgoing, err error) error {
	var apiErr *jetstream.APIError
	var why string
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		why = fmt.Sprintf("is larger than the max_payload of the NATS server (%d bytes)", h.dst.Conn().MaxPayload())
	case errors.As(err, &apiErr) && refusedForGood(apiErr):
		why = "was refused by the stream on NATS"
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		// Asked once a round at most: a batch without responders would
		// otherwise ask for each of its messages.
		if time.Since(h.subjectAsked) < time.Second {
			return nil
		}
		h.subjectAsked = time.Now()
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, lerr := h.dst.StreamNameBySubject(lctx, m.msg.Subject); !errors.Is(lerr, jetstream.ErrStreamNotFound) {
			return nil
		}
		why = fmt.Sprintf("found no stream on NATS: no stream takes its subject %s (give it to %s)", m.msg.Subject, name)
	case errors.Is(err, nats.ErrConnectionClosed):
		why = "was not sent: the connection to NATS is closed"
	default:
		return nil
	}
	// The attempt ends; the caller's next one sends everything again (a
	// full stream may have room by then, as the meter trims it).
	return fmt.Errorf("stream %s: %s %s; this attempt ends, as sending it again now would not change that (the next attempt sends it again): %w", name, m, why, err)
}

// The PubAck errors of a message refused for good (nats-server's
// ErrorIdentifiers: nats.go names few of them).
const (
	errCodeAccountResources      jetstream.ErrorCode = 10002 // resource limits exceeded for account
	errCodeInsufficientResources jetstream.ErrorCode = 10023 // the server's JetStream storage is full
	errCodeStoreFailed           jetstream.ErrorCode = 10077 // "maximum messages exceeded", "maximum bytes exceeded"...
	errCodeHeaderTooLarge        jetstream.ErrorCode = 10097 // header size exceeds maximum allowed
	errCodeStreamSealed          jetstream.ErrorCode = 10109
)

// refusedForGood reports whether e, a PubAck's error, refuses the message
// for what the stream is (its max_msg_size, max_msgs or max_bytes with
// discard new, its account's or server's storage full, sealed), which a
// resend of the same message does not change: only an operator does. The
// others are sent again, up to handOverNoProgress: "duplicate message id
// is in process" (10158: a resend while the first send is still being
// replicated in a cluster) passes by itself, and one not known here may
// too. A store failure is for good but "store is closed" (the stream
// stopping or restarting).
func refusedForGood(e *jetstream.APIError) bool {
	switch e.ErrorCode {
	case jetstream.JSErrCodeStreamMessageExceedsMaximum, errCodeHeaderTooLarge,
		errCodeAccountResources, errCodeInsufficientResources, errCodeStreamSealed:
		return true
	case errCodeStoreFailed:
		return !strings.Contains(e.Description, "closed")
	}
	return false
}

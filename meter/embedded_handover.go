package meter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HandedOverSuffix begins the name a handed-over store directory is
// renamed to: "<dir>.handed-over-<UTC time>" (HandOver).
const HandedOverSuffix = ".handed-over-"

// HasEmbeddedStore reports whether dir holds the store of an embedded
// JetStream server (StartEmbedded's dir: nats-server keeps its store in
// dir/jetstream).
func HasEmbeddedStore(dir string) (bool, error) {
	fi, err := os.Stat(filepath.Join(dir, "jetstream"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("embedded store %s: %w", dir, err)
	}
	return fi.IsDir(), nil
}

// HandOverReport is what HandOver moved, and where the store went.
type HandOverReport struct {
	// Events and DeadLetters are the messages of the usage stream and of
	// the dead-letter stream handed over; EventsKnown and DeadLettersKnown
	// are those of them the destination dropped as duplicates within its
	// window (sent before: by an earlier hand-over cut short, say).
	Events, EventsKnown           int
	DeadLetters, DeadLettersKnown int
	// EventsDone are the events of the usage stream not handed over
	// because the meter had acknowledged them (at or below its durable
	// consumer's ack floor, which the workers trim the stream to): they are
	// in the ledger or among the dead letters. A dead letter sent again
	// would be set aside again, twice in the dead-letter stream.
	EventsDone int
	// Left names the other streams of the store, not handed over (the key
	// buckets: the meter and admin processes fill them again from the
	// ledger).
	Left []string
	// Dir is where the store directory went.
	Dir string
}

// handOverBatch is how many messages HandOver publishes before it waits
// for their PubAcks.
const handOverBatch = 256

// HandOver moves what the embedded JetStream store in dir (a `tollgate
// serve` without a NATS URL ran on it) holds for the ledger to the NATS
// server nc is connected to: every message of the usage stream
// (DefaultStreamName) the meter did not acknowledge (see
// HandOverReport.EventsDone) and of the dead-letter stream (DLQStream), published
// to the subject it was stored under with its headers (the dead letter's
// reason and event id among them) and its Nats-Msg-Id (the event id of a
// usage event), so that a message sent twice is dropped by the
// destination's duplicate window and, past it, by the ledger's unique event
// id. It waits for the PubAck of each, sending again those not
// acknowledged (NATS unreachable, a stream between leaders, say) until ctx
// ends or, when no message was acknowledged for 2 minutes, failing with the
// last reason; a message NATS refuses for good (larger than its
// max_payload, refused by the stream: max_msg_size, max_msgs or max_bytes
// with discard new...; a subject no stream takes) fails it at once, the
// error naming the stream, the message (its sequence in the store, its
// Nats-Msg-Id) and the cause. Then it stops the
// embedded server and renames dir to dir+HandedOverSuffix+now (UTC), where
// the store stays for audit and is not handed over again.
//
// The destination must hold both streams (EnsureStream, EnsureDLQ); a
// missing one is an error, as is a PubAck from another stream than the
// message's own (another stream takes its subject there), a store whose
// usage or dead-letter stream the embedded server did not load, and a
// stream that gave fewer messages than it holds. On any error, or when ctx
// ends first, dir is left as it is, and a later HandOver sends it all
// again. No other process may use dir meanwhile. log takes the embedded
// server's warnings and the publish retries (nil: none).
func HandOver(ctx context.Context, dir string, nc *nats.Conn, now time.Time, log *slog.Logger) (HandOverReport, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var rep HandOverReport
	dst, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(handOverBatch),
		jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		return rep, fmt.Errorf("hand over %s: %w", dir, err)
	}
	// Its async publishes subscribe on nc to a reply subject, and watch
	// nc's status from a goroutine, until nc closes: nc is the caller's
	// (a process's, for its life), and a failed hand-over is tried again
	// every minute, each attempt leaving a subscription and goroutines.
	defer dst.CleanupPublisher()
	for _, name := range []string{DefaultStreamName, DLQStream} {
		if _, err := dst.Stream(ctx, name); err != nil {
			return rep, fmt.Errorf("hand over %s: stream %s on NATS: %w", dir, name, err)
		}
	}
	e, err := StartEmbedded(dir, "", SyncPolicy{}, log)
	if err != nil {
		return rep, fmt.Errorf("hand over %s: %w", dir, err)
	}
	defer e.Shutdown() // after an error; Stop is idempotent
	if err := loadedForHandOver(e); err != nil {
		return rep, fmt.Errorf("hand over %s: %w", dir, err)
	}
	src, err := nats.Connect("", nats.InProcessServer(e), nats.Name("tollgate hand-over"))
	if err != nil {
		return rep, fmt.Errorf("hand over %s: %w", dir, err)
	}
	defer src.Close()
	srcJS, err := jetstream.New(src)
	if err != nil {
		return rep, fmt.Errorf("hand over %s: %w", dir, err)
	}
	h := &storeMover{dst: dst, log: log, progress: time.Now()}
	if rep.Events, rep.EventsKnown, rep.EventsDone, err = h.stream(ctx, srcJS, DefaultStreamName, true); err != nil {
		return rep, fmt.Errorf("hand over %s: %w", dir, err)
	}
	if rep.DeadLetters, rep.DeadLettersKnown, _, err = h.stream(ctx, srcJS, DLQStream, false); err != nil {
		return rep, fmt.Errorf("hand over %s: %w", dir, err)
	}
	names := srcJS.StreamNames(ctx)
	for n := range names.Name() {
		if n != DefaultStreamName && n != DLQStream {
			rep.Left = append(rep.Left, n)
		}
	}
	src.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(sctx); err != nil {
		return rep, fmt.Errorf("hand over %s: stop the embedded server: %w", dir, err)
	}
	to := filepath.Clean(dir) + HandedOverSuffix + now.UTC().Format("20060102T150405Z")
	if err := os.Rename(dir, to); err != nil {
		return rep, fmt.Errorf("hand over %s: all was handed over, but the directory was not renamed (a later hand-over sends it again, harmlessly): %w", dir, err)
	}
	rep.Dir = to
	return rep, nil
}

// loadedForHandOver returns an error when e did not load the usage or the
// dead-letter stream its directory holds: handed over without it, the
// store would be renamed with its events in it.
func loadedForHandOver(e *Embedded) error {
	want, err := storedNames(e.dir)
	if err != nil {
		return err
	}
	missing, err := notLoaded(e.current(), want)
	if err != nil {
		return err
	}
	for _, m := range missing {
		parts := strings.Split(m, "/") // account/stream, or account/stream/consumer
		if len(parts) == 2 && (parts[1] == DefaultStreamName || parts[1] == DLQStream) {
			return fmt.Errorf("the embedded server did not load stream %s of the store (see its log above)", m)
		}
	}
	return nil
}

// storeMover publishes messages to dst, waiting for their PubAcks.
type storeMover struct {
	dst      jetstream.JetStream
	log      *slog.Logger
	lastWarn time.Time // of a publish failure
	progress time.Time // of the last PubAck, or of the start
	// subjectAsked is when refusal last asked NATS which stream takes a
	// subject without responders.
	subjectAsked time.Time
}

// stream hands over every message of src's stream name (none if it does
// not exist), less those the meter acknowledged when acked is set (see
// ackedBelow); it returns how many it handed over, how many of those dst
// knew, and how many it left as acknowledged.
func (h *storeMover) stream(ctx context.Context, src jetstream.JetStream, name string, acked bool) (moved, known, done int, err error) {
	s, err := src.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("stream %s: %w", name, err)
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 {
		return 0, 0, 0, nil
	}
	var floor uint64
	if acked {
		if floor, err = ackedBelow(ctx, s, st.LastSeq); err != nil {
			return 0, 0, 0, fmt.Errorf("stream %s: %w", name, err)
		}
	}
	batch := make([]outgoing, 0, handOverBatch)
	flush := func() error {
		k, err := h.publish(ctx, name, batch)
		moved, known = moved+len(batch), known+k
		batch = batch[:0]
		return err
	}
	// Each request asks for the next message at or after seq, so that the
	// sequences deleted (dead letters replayed) cost nothing.
	for seq := st.FirstSeq; seq <= st.LastSeq; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return moved, known, done, fmt.Errorf("stream %s: message %d: %w", name, seq, err)
		}
		seq = m.Sequence + 1
		if m.Sequence <= floor {
			done++
			continue
		}
		batch = append(batch, outgoing{seq: m.Sequence, msg: handOverMsg(name, m)})
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return moved, known, done, err
			}
		}
	}
	if err := flush(); err != nil {
		return moved, known, done, err
	}
	if uint64(moved+done) != st.Msgs {
		return moved, known, done, fmt.Errorf("stream %s: read %d of the %d messages it holds", name, moved+done, st.Msgs)
	}
	return moved, known, done, nil
}

// ackedBelow is the ack floor of the meter's durable consumer on usage
// stream s, whose last sequence is last: every event at or below it was
// written to the ledger or set aside as a dead letter (see trim). It is 0,
// none, when the consumer is not there, or when its floor is past what it
// was delivered or what the stream holds (trimFloor refuses those).
func ackedBelow(ctx context.Context, s jetstream.Stream, last uint64) (uint64, error) {
	var wc WorkerConfig
	wc.defaults()
	c, err := s.Consumer(ctx, wc.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", wc.Durable, err)
	}
	info := c.CachedInfo()
	floor, err := trimFloor(info.AckFloor.Stream, info.Delivered.Stream, last)
	if err != nil {
		return 0, nil
	}
	return floor, nil
}

// handOverMsg is stored message m of stream name as it is sent again: its
// subject, data and headers, less any expectation of the stream it was
// published to (Nats-Expected-*), with a Nats-Msg-Id naming it when it has
// none.
func handOverMsg(name string, m *jetstream.RawStreamMsg) *nats.Msg {
	out := nats.NewMsg(m.Subject)
	out.Data = m.Data
	for k, v := range m.Header {
		if !strings.HasPrefix(k, "Nats-Expected-") {
			out.Header[k] = v
		}
	}
	if out.Header.Get(nats.MsgIdHdr) == "" {
		out.Header.Set(nats.MsgIdHdr, "handover-"+name+"-"+strconv.FormatUint(m.Sequence, 10)+"-"+strconv.FormatInt(m.Time.UnixNano(), 10))
	}
	return out
}

package keys

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// ShareSubject is the NATS subject on which gateways share their keys'
// counts (core NATS: counts are current state, a lost message is replaced
// by the next within a second).
const ShareSubject = "tollgate.limits"

// shareTTL is how long a gateway's counts of a key count without news: a
// gateway that stopped (or lost NATS) no longer holds the others' limits
// after it. Gateways send every key with counts at least once a second.
const shareTTL = 3 * time.Second

// Share is the gateways' LimitShare over NATS: each gateway publishes its
// limited keys' counts (gateway.LimitShare.Publish: as they move, and
// every second), by the second they were counted in, and holds the last
// counts of each of the others. A limit then holds
// across gateways to within what the others admit between two
// publications (docs/pricing-and-budgets.md, "Rate limits").
type Share struct {
	nc    *nats.Conn
	id    string
	log   *slog.Logger
	sub   *nats.Subscription
	since time.Time // when sub was in place

	mu     sync.Mutex
	others map[string]map[string]remote // key id → gateway id → counts
	swept  time.Time
}

// remote is one other gateway's counts of a key, and when they came.
type remote struct {
	// usage.LimitCounts is the last heard of Requests, Tokens, Open and Seq
	// (its Seconds are in seconds).
	usage.LimitCounts
	seconds []heardSecond // its minute, as last heard of each second
	at      time.Time
}

// heardSecond is one second of another gateway's minute, and the Seq of
// the publication that gave it: a second is replaced only by a later
// publication's (publications read in one order may reach NATS in
// another).
type heardSecond struct {
	usage.LimitSecond
	seq uint64
}

// minute is the span of a per-minute limit, in seconds (gateway's window):
// a second heard is dropped once it has left it.
const minute = 60

// shareMsg is one publication.
type shareMsg struct {
	Gateway string                  `json:"g"`
	Counts  []usage.LimitCountsWire `json:"c"`
}

// NewShare subscribes to the other gateways' counts on nc. Close
// unsubscribes.
func NewShare(nc *nats.Conn, log *slog.Logger) (*Share, error) {
	s := &Share{nc: nc, id: nuid.Next(), log: log, others: map[string]map[string]remote{}}
	sub, err := nc.Subscribe(ShareSubject, s.receive)
	if err != nil {
		return nil, fmt.Errorf("limit share: subscribe: %w", err)
	}
	s.sub = sub
	if nc.IsConnected() { // else the flush waits its whole second for nothing
		_ = nc.FlushTimeout(time.Second) // the subscription in place
	}
	s.since = time.Now()
	return s, nil
}

// JoinWait is how long a gateway's share must have been subscribed before
// the gateway serves (Share.Joined): the other gateways send every key's
// counts once a second, so by then each has been heard once, with a
// margin for a loaded host's late ticks.
const JoinWait = 1250 * time.Millisecond

// Joined waits until the share has been subscribed for JoinWait, or ctx
// ends; at once while NATS is not connected (nothing can be heard then).
// A gateway that served before it had heard the others counted only its
// own requests, none after a restart: beside a gateway that held a key's
// whole rpm_limit (or max_concurrent), it admitted the whole limit again
// in its first second (a review: 10 + 10 requests on an rpm_limit of 10,
// 3 + 3 streams open on a max_concurrent of 3).
func (s *Share) Joined(ctx context.Context) {
	if !s.nc.IsConnected() {
		return
	}
	t := time.NewTimer(time.Until(s.since.Add(JoinWait)))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Close unsubscribes; the counts held are forgotten.
func (s *Share) Close() error {
	return s.sub.Unsubscribe()
}

func (s *Share) receive(m *nats.Msg) {
	var msg shareMsg
	if err := json.Unmarshal(m.Data, &msg); err != nil || msg.Gateway == s.id {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range msg.Counts {
		c, err := w.Counts()
		if err != nil {
			continue // not a gateway's: its seconds do not decode
		}
		g := s.others[c.KeyID]
		if g == nil {
			g = map[string]remote{}
			s.others[c.KeyID] = g
		}
		r, had := g[msg.Gateway]
		newer := !had || c.Seq == 0 || c.Seq > r.Seq
		switch {
		case c.Partial:
			// A change: its second, if a later publication has not given
			// it already.
			for _, sec := range c.Seconds {
				r.seconds = hear(r.seconds, sec, c.Seq)
			}
		case !newer:
			continue // a whole minute read before the counts already heard, published after them
		case len(c.Seconds) == 0 && (c.Requests != 0 || c.Tokens != 0):
			// An earlier release sends the minute's sums only: they are
			// taken as counted now, which holds them for the whole minute
			// (the Retry-After they give is too long, never too short).
			r.seconds = []heardSecond{{usage.LimitSecond{Unix: now.Unix(), Requests: c.Requests, Tokens: c.Tokens}, c.Seq}}
		default:
			// The whole minute: it replaces every second heard before it;
			// a second a later change gave stays.
			next := make([]heardSecond, 0, len(c.Seconds)+1)
			for _, h := range r.seconds {
				if h.seq > c.Seq {
					next = append(next, h)
				}
			}
			for _, sec := range c.Seconds {
				next = hear(next, sec, c.Seq)
			}
			r.seconds = next
		}
		if newer {
			r.LimitCounts = c
			r.LimitCounts.Seconds = nil
		}
		r.seconds = slices.DeleteFunc(r.seconds, func(h heardSecond) bool { return h.Unix <= now.Unix()-minute })
		r.at = now
		g[msg.Gateway] = r
	}
	if now.Sub(s.swept) > shareTTL {
		s.sweep(now)
	}
}

// hear sets second sec, given by the publication numbered seq, in heard,
// unless a later publication gave it already, and returns heard.
func hear(heard []heardSecond, sec usage.LimitSecond, seq uint64) []heardSecond {
	for i := range heard {
		if heard[i].Unix == sec.Unix {
			if seq == 0 || seq >= heard[i].seq {
				heard[i] = heardSecond{sec, seq}
			}
			return heard
		}
	}
	return append(heard, heardSecond{sec, seq})
}

// sweep forgets counts older than shareTTL (s.mu held).
func (s *Share) sweep(now time.Time) {
	s.swept = now
	for key, g := range s.others {
		for id, r := range g {
			if now.Sub(r.at) > shareTTL {
				delete(g, id)
			}
		}
		if len(g) == 0 {
			delete(s.others, key)
		}
	}
}

// Others returns the other gateways' last counts of a key: their seconds
// (usage.LimitCounts.Seconds, one gateway's after another's, in no
// order), and the sum of their open requests.
func (s *Share) Others(keyID string) (seconds []usage.LimitSecond, open int64) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.others[keyID] {
		if now.Sub(r.at) <= shareTTL {
			for _, h := range r.seconds {
				seconds = append(seconds, h.LimitSecond)
			}
			if r.Open > 1<<62-open { // no wrap past int64: anyone on NATS may publish
				open = 1 << 62
			} else {
				open += r.Open
			}
		}
	}
	return seconds, open
}

// Publish sends this gateway's counts to the others. A failure is logged
// (the others then hold this gateway's last counts until shareTTL).
// A message carries counts up to shareBytes (about 80 bytes a key, and
// under 10 a second of its minute holding counts: a key busy in every
// second under 700 bytes), well within NATS's default 1 MiB payload; a
// key's counts are never split.
func (s *Share) Publish(counts []usage.LimitCounts) {
	id, _ := json.Marshal(s.id)
	head := append(append([]byte(`{"g":`), id...), `,"c":[`...)
	msg := head
	flush := func() bool {
		if len(msg) == len(head) {
			return true
		}
		err := s.nc.Publish(ShareSubject, append(msg, ']', '}'))
		msg = append(msg[:0], head...)
		if err != nil && s.nc.IsConnected() {
			s.log.Warn("limit share: publish", "err", err)
			return false
		}
		return true
	}
	for _, c := range counts {
		data, err := json.Marshal(c.Wire())
		if err != nil {
			s.log.Warn("limit share: publish", "err", err)
			return
		}
		if len(msg)+len(data) > shareBytes && !flush() {
			return
		}
		if len(msg) > len(head) {
			msg = append(msg, ',')
		}
		msg = append(msg, data...)
	}
	flush()
}

// shareBytes is about how large one message of counts grows (one key's
// counts more, when they are larger alone).
const shareBytes = 256 << 10

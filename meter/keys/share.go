package keys

import (
	"encoding/json"
	"fmt"
	"log/slog"
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
	nc  *nats.Conn
	id  string
	log *slog.Logger
	sub *nats.Subscription

	mu     sync.Mutex
	others map[string]map[string]remote // key id → gateway id → counts
	swept  time.Time
}

// remote is one other gateway's counts of a key, and when they came.
type remote struct {
	usage.LimitCounts
	at time.Time
}

// shareMsg is one publication.
type shareMsg struct {
	Gateway string              `json:"g"`
	Counts  []usage.LimitCounts `json:"c"`
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
	return s, nil
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
	for _, c := range msg.Counts {
		g := s.others[c.KeyID]
		if g == nil {
			g = map[string]remote{}
			s.others[c.KeyID] = g
		}
		if old, ok := g[msg.Gateway]; ok && c.Seq != 0 && c.Seq < old.Seq {
			continue // read before the counts already heard, published after them
		}
		if len(c.Seconds) == 0 && (c.Requests != 0 || c.Tokens != 0) {
			// An earlier release sends the minute's sums only: they are
			// taken as counted now, which holds them for the whole minute
			// (the Retry-After they give is too long, never too short).
			c.Seconds = []usage.LimitSecond{{Unix: now.Unix(), Requests: c.Requests, Tokens: c.Tokens}}
		}
		g[msg.Gateway] = remote{c, now}
	}
	if now.Sub(s.swept) > shareTTL {
		s.sweep(now)
	}
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
// (usage.LimitCounts.Seconds, one gateway's after another's), and the sum
// of their open requests.
func (s *Share) Others(keyID string) (seconds []usage.LimitSecond, open int64) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.others[keyID] {
		if now.Sub(r.at) <= shareTTL {
			seconds = append(seconds, r.Seconds...)
			open += r.Open
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
		data, err := json.Marshal(c)
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

package gateway

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// LimitShare exchanges keys' counts between the gateways that serve them,
// so that a key's limits hold across gateways (meter/keys implements it
// over NATS). Without one, each gateway enforces the limits alone.
type LimitShare interface {
	// Others returns the other gateways' counts of a key, as they last
	// reported them (within about a second): its requests and tokens by
	// the second they were counted in (LimitCounts.Seconds, every
	// gateway's, in no order; the limiter keeps those of its minute), and
	// its requests open now.
	Others(keyID string) (seconds []LimitSecond, open int64)
	// Publish is given this gateway's counts of a limited key each time
	// they move (a request admitted or ended, tokens counted), and of every
	// key with counts every shareInterval, so that the others know it is
	// still counted (they forget it after a few seconds without news; they
	// slide its minute themselves, by its seconds). It must not block.
	Publish(counts []LimitCounts)
}

// LimitCounts is one key's counts on one gateway (usage.LimitCounts).
type LimitCounts = usage.LimitCounts

// LimitSecond is one second of a key's counts (usage.LimitSecond).
type LimitSecond = usage.LimitSecond

// shareInterval is how often a gateway publishes the counts of every key
// it counts, besides each change as it happens: the others forget a
// gateway's counts of a key after a few seconds without news. What a limit
// may admit beyond itself across gateways is what they admit within the
// delivery time of a change (docs/pricing-and-budgets.md, "Rate limits").
const shareInterval = time.Second

// window is the span of a per-minute limit, in one-second buckets.
const window = 60

// limiter enforces keys' rpm_limit, tpm_limit and max_concurrent: it
// counts each limited key's requests and tokens over a sliding minute of
// one-second buckets, and its open requests, here and, through the share,
// on the other gateways.
type limiter struct {
	share LimitShare
	now   func() time.Time
	mu    sync.Mutex
	keys  map[string]*keyCounts
	seq   uint64 // the last LimitCounts.Seq given (l.mu)
	// buffering counts, per key, the bodies being read before admission
	// (enterBuffering), on this gateway only (l.mu).
	buffering map[string]int64
}

// keyCounts are one key's counts on this gateway.
type keyCounts struct {
	sec       [window]int64 // the Unix second each bucket holds
	req, tok  [window]int64
	open      int64
	lastTouch int64 // Unix second
}

func newLimiter(share LimitShare) *limiter {
	return &limiter{share: share, now: time.Now, keys: map[string]*keyCounts{}, buffering: map[string]int64{}}
}

// enterBuffering counts a body of k read into memory before its request is
// admitted (a chunked body under a tpm_limit, whose estimate admission
// needs), and returns its leave; or, when k's max_concurrent bodies are
// being read already, a refusal. A request is counted against
// max_concurrent only from its admission, so without this a key limited
// to one request at a time could have any number of bodies, each up to
// max_request_bytes, read at once. Keys without max_concurrent are not
// counted (their bodies are bounded as every request's are).
func (l *limiter) enterBuffering(k *usage.KeyState) (leave func(), over *refusal) {
	if k.MaxConcurrent <= 0 {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	open := int64(0)
	if c := l.keys[k.KeyID]; c != nil {
		open = c.open
	}
	if open+l.buffering[k.KeyID] >= k.MaxConcurrent { // its requests open here, and its bodies being read
		return nil, overConcurrency
	}
	l.buffering[k.KeyID]++
	id := k.KeyID
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.buffering[id]--; l.buffering[id] <= 0 {
				delete(l.buffering, id)
			}
		})
	}, nil
}

// limited reports whether k has any limit the limiter enforces.
func limited(k *usage.KeyState) bool { return k.RPMLimit > 0 || k.TPMLimit > 0 || k.MaxConcurrent > 0 }

// refusal is why a request is over a limit, and when to try again.
type refusal struct {
	kind       string // "requests", "tokens" or "concurrency"
	message    string
	retryAfter time.Duration
}

// overConcurrency is the refusal of a request over its key's
// max_concurrent: try again in a second.
var overConcurrency = &refusal{"concurrency", "this API key has reached its limit of concurrent requests", time.Second}

// admit counts a request of k starting now and returns its release (call
// it once the request ends), or the limit it is over. Under a tpm_limit,
// the request holds estimate tokens (at least 1: its prompt's estimate)
// in the minute from its admission to its release, so that requests sent
// together do not each find the minute empty; its real tokens are counted
// by tokens as it settles, and the estimate given back by release.
func (l *limiter) admit(k *usage.KeyState, estimate int64) (release func(), over *refusal) {
	release, _, over = l.admitCounted(k, estimate)
	return release, over
}

// admitCounted is admit, and also returns uncount, which takes the
// request back out of its key's requests of the minute (its tokens and its
// place among the open requests stay until release): for a request that is
// then refused for its spend limit or its customer's credit, which does not
// count against rpm_limit (docs/pricing-and-budgets.md, "Rate limits"), as
// the refusal before admission (the key's state says it may not spend)
// does not. Calling uncount again, or once the request's second has left
// the minute, does nothing.
func (l *limiter) admitCounted(k *usage.KeyState, estimate int64) (release, uncount func(), over *refusal) {
	if !limited(k) {
		return func() {}, func() {}, nil
	}
	var others []LimitSecond
	var oopen int64
	if l.share != nil {
		others, oopen = l.share.Others(k.KeyID)
	}
	now := l.now().Unix()
	oreq, otok := othersSums(others, now)
	l.mu.Lock()
	c := l.counts(k.KeyID)
	c.rebase(now)
	req, tok := c.sums(now)
	switch {
	case k.MaxConcurrent > 0 && c.open+oopen+l.buffering[k.KeyID] >= k.MaxConcurrent: // bodies being read count (enterBuffering)
		l.mu.Unlock()
		return nil, nil, overConcurrency
	case k.RPMLimit > 0 && req+oreq >= k.RPMLimit:
		wait := c.retryAfter(now, k.RPMLimit, others, false) // reads c: under l.mu
		l.mu.Unlock()
		return nil, nil, &refusal{"requests", "this API key has reached its limit of requests per minute", wait}
	case k.TPMLimit > 0 && tok+otok >= k.TPMLimit:
		wait := c.retryAfter(now, k.TPMLimit, others, true)
		l.mu.Unlock()
		return nil, nil, &refusal{"tokens", "this API key has reached its limit of tokens per minute", wait}
	}
	c.bucket(now)
	c.req[now%window]++
	held := int64(0)
	if k.TPMLimit > 0 {
		held = max(estimate, 1)
		c.tok[now%window] += held
	}
	c.open++
	c.lastTouch = now
	l.publish(k.KeyID, c, now, now) // unlocks
	id := k.KeyID
	var once, uncounted sync.Once
	release = func() {
		once.Do(func() {
			l.mu.Lock()
			c := l.keys[id]
			if c == nil {
				l.mu.Unlock()
				return
			}
			c.open--
			if i := now % window; held > 0 && c.sec[i] == now { // still in the minute
				c.tok[i] = max(c.tok[i]-held, 0) // its second counted anew after a clock set back (rebase) may not hold it
			}
			l.publish(id, c, l.now().Unix(), now)
		})
	}
	uncount = func() {
		uncounted.Do(func() {
			l.mu.Lock()
			c := l.keys[id]
			if i := now % window; c == nil || c.sec[i] != now || c.req[i] <= 0 { // gone from the minute
				l.mu.Unlock()
				return
			}
			c.req[now%window]--
			l.publish(id, c, l.now().Unix(), now)
		})
	}
	return release, uncount, nil
}

// counts returns the counts of a key, made when new (l.mu held).
func (l *limiter) counts(keyID string) *keyCounts {
	c := l.keys[keyID]
	if c == nil {
		c = &keyCounts{}
		l.keys[keyID] = c
	}
	return c
}

// publish sends a key's counts to the other gateways after a change to
// second changed of its minute (its sums and open requests, and that
// second alone: LimitCounts.Partial); it is called with l.mu held, and
// unlocks it. The whole minute goes every shareInterval (snapshot): sent
// at each change, it made a limited request's three publications cost
// 9.7 µs and 1.1 KB, against 0.9 µs and 130 bytes (BenchmarkLimitAdmit),
// and each other gateway decode the minute three times a request.
func (l *limiter) publish(keyID string, c *keyCounts, now, changed int64) {
	if l.share == nil {
		l.mu.Unlock()
		return
	}
	req, tok := c.sums(now)
	l.seq++
	lc := LimitCounts{KeyID: keyID, Requests: req, Tokens: tok, Open: c.open, Seq: l.seq, Partial: true}
	if i := changed % window; c.sec[i] == changed && now-changed < window {
		lc.Seconds = []LimitSecond{{Unix: changed, Requests: c.req[i], Tokens: c.tok[i]}}
	}
	l.mu.Unlock()
	l.share.Publish([]LimitCounts{lc})
}

// tokens counts the tokens a request of k used (its provider's figures),
// against its tpm_limit.
func (l *limiter) tokens(k *usage.KeyState, n int64) {
	if k.TPMLimit <= 0 || n <= 0 {
		return
	}
	now := l.now().Unix()
	l.mu.Lock()
	c := l.counts(k.KeyID)
	c.rebase(now)
	c.bucket(now)
	c.tok[now%window] += n
	c.lastTouch = now
	l.publish(k.KeyID, c, now, now)
}

// bucket readies the bucket of second now, emptying it if it holds an
// older second.
func (c *keyCounts) bucket(now int64) {
	if i := now % window; c.sec[i] != now {
		c.sec[i], c.req[i], c.tok[i] = now, 0, 0
	}
}

// rebase moves the counts of seconds after now, counted before the
// gateway's clock was set back, into second now, so that they leave the
// minute a minute after the step at the latest. Left where they were, they
// counted until the clock came back to them: a key at its rpm_limit when
// the clock went back an hour was refused for the hour. A request's
// estimate moved so stays counted until its second leaves the minute (its
// release finds its second gone), which refuses early, never late.
func (c *keyCounts) rebase(now int64) {
	var req, tok int64
	ahead := false
	for i := range window {
		if c.sec[i] > now {
			req, tok, ahead = req+c.req[i], tok+c.tok[i], true
			c.sec[i], c.req[i], c.tok[i] = 0, 0, 0
		}
	}
	if ahead {
		c.bucket(now)
		c.req[now%window] += req
		c.tok[now%window] += tok
	}
}

// sums are the requests and tokens of the last minute up to second now.
func (c *keyCounts) sums(now int64) (req, tok int64) {
	for i := range window {
		if now-c.sec[i] < window {
			req += c.req[i]
			tok += c.tok[i]
		}
	}
	return req, tok
}

// seconds are the seconds of the minute up to second now that hold
// requests or tokens, oldest first (LimitCounts.Seconds).
func (c *keyCounts) seconds(now int64) []LimitSecond {
	held := func(i int64) bool { return now-c.sec[i] < window && (c.req[i] != 0 || c.tok[i] != 0) }
	n := 0
	for i := range int64(window) {
		if held(i) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]LimitSecond, 0, n)
	for j := range int64(window) { // the bucket of second now-window+1+j
		if i := (now + 1 + j) % window; held(i) {
			out = append(out, LimitSecond{Unix: c.sec[i], Requests: c.req[i], Tokens: c.tok[i]})
		}
	}
	return out
}

// othersSums are the requests and tokens of the other gateways' seconds
// in the minute up to second now.
func othersSums(others []LimitSecond, now int64) (req, tok int64) {
	for _, s := range others {
		if s.Unix > now-window { // not now-s.Unix < window: that overflows on a far second
			req = satAdd(req, s.Requests)
			tok = satAdd(tok, s.Tokens)
		}
	}
	return req, tok
}

// countCap bounds the sums of the other gateways' counts, so that adding
// this gateway's to them cannot pass int64's range: counts that large
// (anything with NATS access can publish them) wrapped negative, and
// admitted the key.
const countCap = 1 << 62

// satAdd is a+b for counts a (0 to countCap) and b, b taken as 0 when
// negative, the sum no more than countCap.
func satAdd(a, b int64) int64 {
	b = min(max(b, 0), countCap)
	if a > countCap-b {
		return countCap
	}
	return a + b
}

// retryAfter is how long until the minute up to second now, this
// gateway's buckets and the others' seconds together, holds fewer than
// limit requests (or, with tokens, tokens) again, none being added: its
// seconds leave it oldest first, second s at s+window, until what stays is
// under the limit (more than the oldest one, when the minute holds more
// than the limit: a limit lowered, or requests admitted on several
// gateways within a count's delivery). now is the current second
// truncated, so the seconds are rounded up; at least one.
func (c *keyCounts) retryAfter(now, limit int64, others []LimitSecond, tokens bool) time.Duration {
	secs := c.seconds(now)
	for _, s := range others {
		if s.Unix > now-window {
			secs = append(secs, s)
		}
	}
	slices.SortStableFunc(secs, func(a, b LimitSecond) int { return cmp.Compare(a.Unix, b.Unix) })
	count := func(s LimitSecond) int64 { // as othersSums adds them: see satAdd
		if tokens {
			return satAdd(0, s.Tokens)
		}
		return satAdd(0, s.Requests)
	}
	stay := int64(0)
	for _, s := range secs {
		stay = satAdd(stay, count(s))
	}
	wait := int64(1) // under it already: now
	for _, s := range secs {
		if stay < limit {
			break
		}
		stay -= count(s)
		wait = s.Unix + window - now
	}
	// At most the minute: a second from a gateway whose clock runs ahead
	// would give more.
	return time.Duration(min(max(wait, 1), window)) * time.Second
}

// snapshot returns the counts of every key with counts in the last minute
// or requests open (so that the others' view of them, which they forget
// after a few seconds without news, stays current as the minute slides),
// and forgets keys idle for a minute.
func (l *limiter) snapshot() []LimitCounts {
	now := l.now().Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LimitCounts
	for id, c := range l.keys {
		if now-c.lastTouch > window && c.open == 0 {
			delete(l.keys, id)
			continue
		}
		c.rebase(now)
		req, tok := c.sums(now)
		l.seq++
		out = append(out, LimitCounts{KeyID: id, Requests: req, Tokens: tok, Open: c.open, Seq: l.seq, Seconds: c.seconds(now)})
	}
	return out
}

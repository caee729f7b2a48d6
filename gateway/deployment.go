package gateway

import (
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// deployment is one deployment of a model (see DeploymentConfig) with its
// health on this gateway: a deployment that failed rests for a cool-down,
// which doubles with each failure in a row (each once its rest is over;
// up to RetryConfig.MaxCooldown) and is at least what the upstream's Retry-After asked for; a success
// ends the run of failures.
type deployment struct {
	name     string
	provider *ProviderConfig
	upstream string
	weight   int
	maxOpen  int // max_concurrent, 0: none
	rpm      int // rpm_limit, 0: none
	now      func() time.Time

	mu        sync.Mutex
	restUntil time.Time
	failures  int         // in a row
	open      int         // attempts in flight
	sent      []time.Time // the last rpm attempts' starts, a ring (rpm > 0)
	next      int         // the ring's oldest
}

func newDeployment(c DeploymentConfig, p *ProviderConfig) *deployment {
	d := &deployment{name: c.Name, provider: p, upstream: c.UpstreamModel, weight: max(c.Weight, 1),
		maxOpen: c.MaxConcurrent, rpm: c.RPMLimit, now: time.Now}
	if d.rpm > 0 {
		d.sent = make([]time.Time, 0, d.rpm)
	}
	return d
}

// available reports whether d may take an attempt now: it is not cooling
// down and is under its max_concurrent and rpm_limit.
func (d *deployment) available() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	switch {
	case now.Before(d.restUntil):
		return false
	case d.maxOpen > 0 && d.open >= d.maxOpen:
		return false
	case d.rpm > 0 && len(d.sent) == d.rpm && now.Sub(d.sent[d.next]) < time.Minute:
		return false
	}
	return true
}

// resting reports whether d is cooling down after failures (not only at
// its max_concurrent or rpm_limit).
func (d *deployment) resting() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.now().Before(d.restUntil)
}

// availableAt is when d's cool-down ends (the zero time when it is not
// cooling down).
func (d *deployment) availableAt() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.restUntil
}

// acquire counts an attempt starting on d; release(outcome, retryAfter)
// ends it, and returns what it changed (change): a failure (a connect
// error, a 401, 402, 408, 429 or 5xx, a stream broken before its first byte,
// the provider's error under a 200, or a stream that broke, stalled or
// sent the provider's error after its first byte:
// exchange.brokeAfterStart) starts a cool-down of at least retryAfter, a
// success ends the run of failures; an attempt that neither succeeded nor
// failed upstream (the client left, say) leaves the health as it was. The
// run counts a failure only once d's rest is over: failures in flight
// together are one.
func (d *deployment) acquire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.open++
	if d.rpm > 0 {
		now := d.now()
		if len(d.sent) < d.rpm {
			d.sent = append(d.sent, now)
		} else {
			d.sent[d.next] = now
			d.next = (d.next + 1) % d.rpm
		}
	}
}

// outcome is how an attempt ended, for the deployment's health.
type outcome uint8

const (
	outcomeNeutral outcome = iota // neither: the client left, a client error
	outcomeOK
	outcomeFailed
)

// change is what an attempt's end did to its deployment's health, for the
// operator's log (Server.logHealth): a rest begun (a failure counted in
// the run: at most one a rest), of rest (a duration), the failures in a
// row counted so far; or a run of failures ended by a success
// (recovered), of failures. The zero change is none.
type change struct {
	rested, recovered bool
	rest              time.Duration
	failures          int
}

func (d *deployment) release(o outcome, retryAfter time.Duration, rc RetryConfig) change {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.open--
	return d.record(o, retryAfter, rc)
}

// counted records the outcome o of a token count on d, as release
// records an attempt's: a failure rests d, a count served ends its run of
// failures. A count takes no place under max_concurrent or rpm_limit (it
// never acquired one), and leaves their counts as they were.
func (d *deployment) counted(o outcome, retryAfter time.Duration, rc RetryConfig) change {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.record(o, retryAfter, rc)
}

// record moves d's health by an attempt's outcome o (see release); d.mu
// is held.
func (d *deployment) record(o outcome, retryAfter time.Duration, rc RetryConfig) change {
	switch o {
	case outcomeOK:
		c := change{recovered: d.failures > 0, failures: d.failures}
		d.failures = 0
		return c
	case outcomeFailed:
		// A failure while d rests already (an attempt in flight with the
		// one that began the rest, or one sent to it as a last resort)
		// is of the same run: it extends the rest, and does not double it.
		// Counted one by one, eight attempts failed by one blip rested d
		// 128 times its cool-down.
		counted := false
		if now := d.now(); d.failures == 0 || !now.Before(d.restUntil) {
			d.failures++
			counted = true
		}
		rest := rc.Cooldown << min(d.failures-1, 20)
		if rest <= 0 || rest > rc.MaxCooldown {
			rest = rc.MaxCooldown
		}
		rest = max(rest, retryAfter)
		if until := d.now().Add(rest); until.After(d.restUntil) {
			d.restUntil = until
		}
		return change{rested: counted, rest: rest, failures: d.failures}
	}
	return change{}
}

// weightedOrder returns ds in a random order in which each place goes to
// a deployment with a probability proportional to its weight among those
// not placed yet (Efraimidis and Spirakis' weighted sampling without
// replacement: sort by u^(1/w), u uniform in (0,1), descending).
func weightedOrder(ds []*deployment) []*deployment {
	if len(ds) <= 1 {
		return ds
	}
	type keyed struct {
		d *deployment
		k float64
	}
	ks := make([]keyed, len(ds))
	for i, d := range ds {
		u := 1 - rand.Float64() // (0, 1]
		ks[i] = keyed{d, math.Log(u) / float64(d.weight)}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		switch {
		case a.k > b.k:
			return -1
		case a.k < b.k:
			return 1
		}
		return 0
	})
	out := make([]*deployment, len(ds))
	for i, k := range ks {
		out[i] = k.d
	}
	return out
}

// sortByRest orders attempts by when their deployment's cool-down ends,
// soonest first.
func sortByRest(as []attempt) {
	slices.SortStableFunc(as, func(a, b attempt) int { return a.dep.availableAt().Compare(b.dep.availableAt()) })
}

// retryAfter is the backoff an upstream response asks for: Retry-After
// (seconds, or an HTTP date) or retry-after-ms (OpenAI's, milliseconds),
// the longer; 0 when it asks for none or what it sent does not parse.
// Bounded by a day.
func retryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 && !math.IsInf(n, 0) {
			d = time.Duration(min(n, 86400) * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 && !math.IsInf(n, 0) {
			d = max(d, time.Duration(min(n, 86400e3)*float64(time.Millisecond)))
		}
	}
	return min(max(d, 0), 24*time.Hour)
}

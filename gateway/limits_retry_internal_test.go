package gateway

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRetryAfterIsWhenTheMinuteAdmitsAgain: a 429 for rpm_limit or
// tpm_limit says, in Retry-After, the seconds until the sliding minute
// admits the request again. It said 60 s whenever the minute's counts had
// come from another gateway (this gateway held none, so the oldest second
// it knew of was now), and, when the minute held more than the limit (a
// limit lowered, requests admitted on two gateways within one delivery),
// the seconds until its oldest second left it, though the requests that
// stayed were still over the limit.
func TestRetryAfterIsWhenTheMinuteAdmitsAgain(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	now := t0
	clock := func() time.Time { return now }
	net := &shareNet{seen: map[int]map[string]LimitCounts{}}
	a, b := newLimiter(net.member(0)), newLimiter(net.member(1))
	a.now, b.now = clock, clock

	// Requests: one on A at t0; B, asked 20 s later, holds none of the
	// minute's counts. The minute admits again at t0+60: in 40 s.
	k := &usage.KeyState{KeyID: "r", RPMLimit: 1}
	if _, over := a.admit(k, 0); over != nil {
		t.Fatal(over)
	}
	now = t0.Add(20 * time.Second)
	if _, over := b.admit(k, 0); over == nil || over.kind != "requests" || over.retryAfter != 40*time.Second {
		t.Errorf("rpm_limit 1, its request made on A 20 s ago, asked on B: %+v; want requests, retry after 40s", over)
	}
	if _, over := a.admit(k, 0); over == nil || over.retryAfter != 40*time.Second {
		t.Errorf("the same on A: %+v; want retry after 40s", over)
	}

	// Tokens: 80 counted on A at t0, 30 on B at t0+10, limit 100. Asked
	// at t0+20 on either, the minute is under 100 once A's 80 leave it.
	now = t0
	kt := &usage.KeyState{KeyID: "t", TPMLimit: 100}
	a.tokens(kt, 80)
	now = t0.Add(10 * time.Second)
	b.tokens(kt, 30)
	now = t0.Add(20 * time.Second)
	for name, l := range map[string]*limiter{"A": a, "B": b} {
		if _, over := l.admit(kt, 1); over == nil || over.kind != "tokens" || over.retryAfter != 40*time.Second {
			t.Errorf("tpm_limit 100, 80 tokens on A at t0 and 30 on B at t0+10, asked on %s at t0+20: %+v; want tokens, retry after 40s", name, over)
		}
	}

	// Over the limit: four requests at t0, t0+10, t0+20 and t0+30 under
	// an rpm_limit of 10, then the limit lowered to 2. At t0+40 one
	// request leaving is not enough: three must, the third at t0+80.
	now = t0
	kl := &usage.KeyState{KeyID: "l", RPMLimit: 10}
	for i := range 4 {
		now = t0.Add(time.Duration(i*10) * time.Second)
		l := a
		if i%2 == 1 {
			l = b
		}
		if _, over := l.admit(kl, 0); over != nil {
			t.Fatal(over)
		}
	}
	now = t0.Add(40 * time.Second)
	kl.RPMLimit = 2
	for name, l := range map[string]*limiter{"A": a, "B": b} {
		if _, over := l.admit(kl, 0); over == nil || over.retryAfter != 40*time.Second {
			t.Errorf("4 requests at t0..t0+30, rpm_limit lowered to 2, asked on %s at t0+40: %+v; want retry after 40s (until 1 is left)", name, over)
		}
	}
}

// TestRetryAfterIsAtMostAMinute: whatever second another gateway's counts
// say (its clock ahead, or a hostile publisher), a 429's Retry-After
// is at most the minute a count stays in; a second a year ahead said a
// year, which a client's SDK obeys.
func TestRetryAfterIsAtMostAMinute(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	share := fixedShare{{Unix: now.Unix() + 365*24*3600, Requests: 5}}
	l := newLimiter(share)
	l.now = func() time.Time { return now }
	k := &usage.KeyState{KeyID: "k", RPMLimit: 1}
	if _, over := l.admit(k, 0); over == nil || over.retryAfter > time.Minute || over.retryAfter < time.Second {
		t.Fatalf("another gateway's 5 requests a year ahead, rpm_limit 1: %+v; want refused, retry after 1 s to 60 s", over)
	}
}

// fixedShare is a LimitShare whose other gateways hold these seconds.
type fixedShare []LimitSecond

func (f fixedShare) Others(string) ([]LimitSecond, int64) { return f, 0 }
func (fixedShare) Publish([]LimitCounts)                  {}

// TestOthersCountsDoNotWrap: other gateways' counts so large that their
// sum passes int64's range (a hostile publisher's) refuse the key, as
// counts over its limit do; the sum wrapped negative and admitted it.
func TestOthersCountsDoNotWrap(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	huge := int64(1<<63 - 1)
	share := fixedShare{{Unix: now.Unix() - 2, Requests: huge, Tokens: huge}, {Unix: now.Unix() - 1, Requests: huge, Tokens: huge}}
	l := newLimiter(share)
	l.now = func() time.Time { return now }
	for _, k := range []*usage.KeyState{{KeyID: "r", RPMLimit: 10}, {KeyID: "t", TPMLimit: 10}} {
		if _, over := l.admit(k, 0); over == nil || over.retryAfter < time.Second || over.retryAfter > time.Minute {
			t.Errorf("rpm_limit %d, tpm_limit %d, others' counts past int64: %+v; want refused within a minute", k.RPMLimit, k.TPMLimit, over)
		}
	}
}

// TestAncientSecondsLeaveTheMinute: another gateway's second as far back
// as int64 goes has left the minute; now minus it overflowed to a
// negative age, and its requests counted in every minute.
func TestAncientSecondsLeaveTheMinute(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newLimiter(fixedShare{{Unix: -1 << 63, Requests: 5, Tokens: 5}})
	l.now = func() time.Time { return now }
	if _, over := l.admit(&usage.KeyState{KeyID: "k", RPMLimit: 1}, 0); over != nil {
		t.Fatalf("rpm_limit 1, the others' 5 requests at the first second int64 holds: %+v; want admitted", over)
	}
}

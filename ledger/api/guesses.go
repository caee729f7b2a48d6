package api

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Guessing the admin token is slowed down per client address: an address
// may send GuessBurst wrong tokens at once, then one more every GuessEvery;
// beyond that its requests that carry a token are answered 429
// rate_limit_exceeded, with Retry-After, before the token is looked at
// (so a right token guessed then is refused too). A request with no
// Authorization header guesses nothing: it is neither counted nor slowed
// down (401), so that probing the routes unauthenticated reads their
// 401s. A right token spends nothing. The console's sign-in asks the admin
// API with the browser's address, so it is slowed down alike (the calls
// of a session it signed in are not: CheckedToken). An IPv6
// address counts with its /64 (one host's usual share). Customer API keys
// are not slowed down: they carry 256 random bits (ledger.KeyPrefix). The
// allowance is generous for a person or a script with a stale token and
// still turns thousands of guesses a second into one.
const (
	GuessBurst = 50
	GuessEvery = time.Second
)

// checkedKey is the context key of CheckedToken.
type checkedKey struct{}

// CheckedToken returns ctx for the in-process requests to the admin API of
// a caller that checked the token it sends with the API before (the web
// console, for a signed-in session: its token was checked at the
// sign-in). Such a request guesses nothing, so the wrong tokens of its
// address do not make it wait (it would answer 429): behind a proxy, every
// browser has the proxy's address, and anyone sending wrong tokens to the
// console's sign-in locked every signed-in operator out. Its token is
// still checked, and a wrong one counts as a guess. Only code in the
// process can set it: no request from the network carries it.
func CheckedToken(ctx context.Context) context.Context {
	return context.WithValue(ctx, checkedKey{}, true)
}

// mustWait is how long r must wait before its token is looked at (0: it
// may be): guesses.wait, and 0 for a request whose token its caller
// checked before (CheckedToken).
func (g *guesses) mustWait(r *http.Request, now time.Time) time.Duration {
	if checked, _ := r.Context().Value(checkedKey{}).(bool); checked {
		return 0
	}
	return g.wait(r, now)
}

// guessAddrs bounds the addresses whose wrong guesses are remembered at
// once. An address whose allowance has refilled is forgotten first; when
// every one remembered is still spending, a new address shares one
// allowance with the other new ones (so that many addresses at once are
// slowed down together rather than remembered without bound).
const guessAddrs = 4096

// guesses is the allowance of wrong admin tokens of each client address,
// kept as a time, not a count (the generic cell rate algorithm): an
// address's due time moves GuessEvery later with each wrong token (from
// now, when it lies in the past), and the address may send one while its
// due time is at most (GuessBurst-1)×GuessEvery ahead. Times and
// durations are integers: nothing here is a float.
type guesses struct {
	mu     sync.Mutex
	by     map[netip.Prefix]*time.Time
	shared time.Time // addresses beyond guessAddrs, and unparsable ones
}

func newGuesses() *guesses { return &guesses{by: map[netip.Prefix]*time.Time{}} }

// slack is how far ahead of now an address's due time may be while it may
// still guess.
const slack = (GuessBurst - 1) * GuessEvery

// wait is how long r's address must wait before its token is looked at
// again: 0 while it has a guess left.
func (g *guesses) wait(r *http.Request, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	due := *g.due(r, now, false)
	if !due.After(now.Add(slack)) { // a zero time too: Sub would saturate
		return 0
	}
	return due.Sub(now) - slack
}

// failed spends one of r's address's guesses on a wrong token.
func (g *guesses) failed(r *http.Request, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	due := g.due(r, now, true)
	if due.Before(now) {
		*due = now
	}
	*due = due.Add(GuessEvery)
}

// due returns r's address's due time, under g.mu. An address not
// remembered (it never guessed wrong, or its due time passed and it was
// forgotten) has a scratch zero time, unless remember is set: then it is
// remembered from now on. When there is no room left, new addresses share
// one due time.
func (g *guesses) due(r *http.Request, now time.Time, remember bool) *time.Time {
	key, ok := clientPrefix(r.RemoteAddr)
	if !ok {
		return &g.shared
	}
	if t := g.by[key]; t != nil {
		return t
	}
	if len(g.by) >= guessAddrs {
		for k, t := range g.by {
			if !t.After(now) {
				delete(g.by, k) // its allowance is whole again
			}
		}
		if len(g.by) >= guessAddrs {
			return &g.shared
		}
	}
	t := new(time.Time)
	if remember {
		g.by[key] = t
	}
	return t
}

// clientPrefix is the address of remoteAddr (host:port, as net/http sets
// it) that guesses count against: the IPv4 address, or the IPv6 /64.
func clientPrefix(remoteAddr string) (netip.Prefix, bool) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}, false
	}
	a = a.Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p, true
}

// retryAfter is d as a Retry-After header's whole seconds, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

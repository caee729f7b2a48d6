package api

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Guessing the admin token is slowed down per client address: an address
// may send GuessBurst wrong tokens at once, then one more every GuessEvery;
// beyond that its requests that carry a token are answered 429
// rate_limit_exceeded, with Retry-After, before the token is looked at
// (so a right token guessed then is refused too). A request with no
// Authorization header guesses nothing: it is neither counted nor slowed
// down (401), so that probing the routes unauthenticated reads their
// 401s. A right token spends nothing. The console's sign-in asks the admin
// API with the browser's address, so it is slowed down alike. An IPv6
// address counts with its /64 (one host's usual share). Customer API keys
// are not slowed down: they carry 256 random bits (ledger.KeyPrefix). The
// allowance is generous for a person or a script with a stale token and
// still turns thousands of guesses a second into one.
const (
	GuessBurst = 50
	GuessEvery = time.Second
)

// guessAddrs bounds the addresses whose wrong guesses are remembered at
// once. An address whose allowance has refilled is forgotten first; when
// every one remembered is still spending, a new address shares one
// allowance with the other new ones (so that many addresses at once are
// slowed down together rather than remembered without bound).
const guessAddrs = 4096

// guesses is the allowance of wrong admin tokens of each client address.
type guesses struct {
	mu     sync.Mutex
	by     map[netip.Prefix]*rate.Limiter
	shared *rate.Limiter // addresses beyond guessAddrs, and unparsable ones
}

func newGuesses() *guesses {
	return &guesses{by: map[netip.Prefix]*rate.Limiter{}, shared: newGuessLimiter()}
}

func newGuessLimiter() *rate.Limiter { return rate.NewLimiter(rate.Every(GuessEvery), GuessBurst) }

// wait is how long r's address must wait before its token is looked at
// again: 0 while it has a guess left.
func (g *guesses) wait(r *http.Request, now time.Time) time.Duration {
	l := g.limiter(r, now, false)
	if l == nil {
		return 0
	}
	tokens := l.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) * float64(GuessEvery))
}

// failed spends one of r's address's guesses on a wrong token.
func (g *guesses) failed(r *http.Request, now time.Time) {
	g.limiter(r, now, true).AllowN(now, 1)
}

// limiter returns the allowance of r's address. One not remembered yet
// (it never guessed wrong, or its allowance refilled and was forgotten)
// has nil, a full allowance, unless remember is set: then it is
// remembered from now on. When there is no room left, new addresses have
// the shared allowance.
func (g *guesses) limiter(r *http.Request, now time.Time, remember bool) *rate.Limiter {
	key, ok := clientPrefix(r.RemoteAddr)
	if !ok {
		return g.shared
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.by[key]; l != nil {
		return l
	}
	if !remember {
		if len(g.by) >= guessAddrs {
			return g.shared // a new address may be sharing it: look there
		}
		return nil
	}
	if len(g.by) >= guessAddrs {
		for k, l := range g.by {
			if l.TokensAt(now) >= GuessBurst {
				delete(g.by, k)
			}
		}
		if len(g.by) >= guessAddrs {
			return g.shared
		}
	}
	l := newGuessLimiter()
	g.by[key] = l
	return l
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
	return max(1, int(math.Ceil(d.Seconds())))
}

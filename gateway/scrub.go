package gateway

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
)

// Redacted replaces a provider's credential, upstreamMark its address, and
// localMark the gateway's own end of a connection, in what clients are
// shown.
const (
	redacted     = "[redacted]"
	upstreamMark = "[upstream]"
	localMark    = "[gateway]"
)

// scrubber removes one provider's secrets from text a client will see.
type scrubber struct {
	r      *strings.Replacer
	olds   [][]byte // the secrets, for a cheap test before replacing bytes
	byNews [][]byte
}

// newScrubber scrubs p's API key (when it is long enough to be one, 8
// bytes or more) and its base URL and host, and the credential its base
// URL's user info holds (https://user:pass@host/v1, sent as basic auth:
// see upstreamRequest): the basic auth value, and the password when it is
// 8 bytes or more.
func newScrubber(p *ProviderConfig) *scrubber {
	var pairs []string
	if len(p.APIKey) >= 8 {
		pairs = append(pairs, p.APIKey, redacted)
	}
	if p.BaseURL != "" {
		pairs = append(pairs, p.BaseURL, upstreamMark)
		if u, err := url.Parse(p.BaseURL); err == nil && u.Host != "" {
			if pass, ok := u.User.Password(); ok {
				// The longer first: strings.Replacer takes the first
				// match at a place, in the order given.
				basic := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pass))
				pairs = append(pairs, basic, redacted)
				if len(pass) >= 8 {
					pairs = append(pairs, pass, redacted)
				}
			}
			pairs = append(pairs, u.Host, upstreamMark)
			if h := u.Hostname(); h != u.Host && len(h) >= 8 {
				pairs = append(pairs, h, upstreamMark)
			}
		}
	}
	s := &scrubber{r: strings.NewReplacer(pairs...)}
	for i := 0; i < len(pairs); i += 2 {
		s.olds = append(s.olds, []byte(pairs[i]))
		s.byNews = append(s.byNews, []byte(pairs[i+1]))
	}
	return s
}

// scrubFor scrubs text of the secrets of the provider named name.
func (s *Server) scrubFor(name, text string) string {
	if p := s.routes.providers[name]; p != nil && p.scrub != nil {
		text = p.scrub.r.Replace(text)
		if i, j := cutAt(p.scrub, text); i >= 0 {
			text = text[:i] + string(p.scrub.byNews[j])
		}
	}
	return text
}

// minCut is the shortest first part of a secret that cutAt finds at the
// end of a text: shorter ones (a key's "sk-proj-", a URL's "https://") are no
// secret, and would be found in ordinary text.
const minCut = 9

// cutAt finds where text ends in the first part, minCut bytes or more, of
// one of sc's secrets, the rest of it cut off (a body read to a bound,
// then scrubbed: an echoed key across the bound): it returns where that
// part begins and which secret's it is, or -1. A whole secret was
// replaced before. It looks at the last bytes of text alone, fewer than
// the secret's length, and allocates nothing.
func cutAt[T string | []byte](sc *scrubber, text T) (int, int) {
	for j, old := range sc.olds {
		for i := max(0, len(text)-len(old)+1); len(text)-i >= minCut; i++ {
			if isPrefix(old, text[i:]) {
				return i, j
			}
		}
	}
	return -1, 0
}

// isPrefix reports whether part is the first len(part) bytes of secret.
func isPrefix[T string | []byte](secret []byte, part T) bool {
	if len(part) > len(secret) {
		return false
	}
	for i := range len(part) {
		if part[i] != secret[i] {
			return false
		}
	}
	return true
}

// scrubBytes scrubs b of the secrets of the provider named name, returning
// b itself when it holds none (the usual case: no copy).
func (s *Server) scrubBytes(name string, b []byte) []byte {
	p := s.routes.providers[name]
	if p == nil || p.scrub == nil {
		return b
	}
	for i, old := range p.scrub.olds {
		if bytes.Contains(b, old) {
			b = bytes.ReplaceAll(b, old, p.scrub.byNews[i])
		}
	}
	if i, j := cutAt(p.scrub, b); i >= 0 {
		b = append(b[:i:i], p.scrub.byNews[j]...)
	}
	return b
}

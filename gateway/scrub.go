package gateway

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
)

// Redacted replaces a provider's credential, and upstreamMark its address,
// in what clients are shown.
const (
	redacted     = "[redacted]"
	upstreamMark = "[upstream]"
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
		return p.scrub.r.Replace(text)
	}
	return text
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
	return b
}

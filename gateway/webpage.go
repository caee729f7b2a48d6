package gateway

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// webPage looks once at a 200 answer whose Content-Type is none an API
// answers with (JSON, a +json type, an SSE stream: those are not looked
// at): it reads the body's first bytes (at most pageSniff of them, until
// one that is not blank, under stall_timeout and what is left of
// request_timeout) and, when they begin with '<', says what came
// ("text/html", or "no Content-Type and a body beginning with '<'", or the
// Content-Type it had and the same): a web page (a
// captive portal, a base_url naming a web site, a proxy's error page),
// which no API the gateway speaks answers with. Relayed, it reached the
// client as the answer and was billed (the prompt and the page's bytes as
// output, estimated); it is the deployment's failure, as a 5xx is, and
// bills nothing. Otherwise what it read is put back in front of the body
// (an answer that is the API's with no Content-Type, or a text/html label
// on JSON, which answerType relabels) and it returns "". An error or a
// timeout while reading is left to the relay, which reads it next.
func (x *exchange) webPage(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	if apiType(ct) {
		return ""
	}
	wait, cause := withinRequest(x.stallAfter, errStalled, x.endBy, time.Since(x.start))
	t := timerCancel(x, wait, cause)
	buf := make([]byte, 0, pageSniff)
	for len(buf) < cap(buf) && len(bytes.TrimLeft(buf, " \t\r\n\ufeff")) == 0 {
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			break
		}
	}
	t.Stop()
	if what := pageKind(ct, buf); what != "" {
		return what
	}
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
	return ""
}

// pageKind says what a 200 of Content-Type ct whose body begins with head
// is when it is a web page (see webPage): ct is none an API answers with
// and head's first bytes past blanks are '<'; else "".
func pageKind(ct string, head []byte) string {
	if apiType(ct) {
		return ""
	}
	b := bytes.TrimLeft(head, " \t\r\n\ufeff")
	if len(b) == 0 || b[0] != '<' {
		return ""
	}
	mt, _, _ := mime.ParseMediaType(ct)
	switch {
	case mt == "text/html":
		return mt
	case ct != "":
		return fmt.Sprintf("Content-Type %q and a body beginning with '<'", ct)
	}
	return "no Content-Type and a body beginning with '<'"
}

// pageMessage is what a client is told of a 200 that was a web page,
// what came being pageKind's.
func pageMessage(what string) string {
	return fmt.Sprintf("the upstream answered 200 with %s, not an API answer: is its base_url right, or a proxy or captive portal in the way?", what)
}

// apiType reports whether ct, a Content-Type, is one an API answers
// with: application/json, an application/…+json type, text/event-stream
// (in any case, with any parameters). It allocates nothing (every answer
// passes it; mime.ParseMediaType makes a map each call).
func apiType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	return strings.EqualFold(mt, "application/json") || strings.EqualFold(mt, "text/event-stream") ||
		len(mt) > len("application/+json") && strings.EqualFold(mt[:len("application/")], "application/") &&
			strings.EqualFold(mt[len(mt)-len("+json"):], "+json")
}

// pageSniff is the most webPage reads of a body, in bytes: 512, as
// net/http's content sniffing.
const pageSniff = 512

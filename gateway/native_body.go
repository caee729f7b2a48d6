package gateway

import (
	"bytes"
	"net/http"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// passBody relays a whole native response body unchanged, its usage
// tapped, the event durable before the body is sent.
func (s *Server) passBody(x *exchange, resp *http.Response, rt *provider.Route) {
	body, err := s.readBody(x, resp.Body)
	s.relayBody(x, resp, body, err, rt)
}

// relayBody is passBody's relay of body, read with err. A body that is SSE
// (an upstream that ignored "stream": false) is tapped event by event by
// the route's stream tap, as tapStreamAnswer reads one on the chat route:
// read as one unreadable body, its framing would be billed as output.
func (s *Server) relayBody(x *exchange, resp *http.Response, body []byte, err error, rt *provider.Route) {
	if err = x.emptyBody(body, err); err != nil {
		status, eventStatus := x.failure()
		x.fail(status, eventStatus, err)
		return
	}
	if err := rt.BodyUsage(body, &x.report); err != nil {
		if !jsonStart(body) && streamAnswer(resp.Header, body) && rt.NewTap != nil {
			tp := rt.NewTap()
			rd := sse.NewReader(bytes.NewReader(body))
			for {
				ev, rerr := rd.Next()
				if rerr != nil {
					break
				}
				tp.Event(&ev, &x.report)
				x.report.StreamEvent(ev.HasData)
			}
		}
		if r := &x.report; !r.Reported && r.Output.Len() == 0 {
			x.unreadableBody(body, err)
		}
	}
	if x.noAnswerOf(body, rt.Answer) {
		x.report.Error = errNoAnswer // relayed as it came, billing nothing, as an error object is
	}
	if x.errorUnder200(body) {
		return // an error object, the provider's failure: the next attempt serves
	}
	x.firstByte()
	x.markComplete()
	x.httpStatusOK()
	if !x.commitAnswer() {
		return
	}
	if rt.BilledUsage != nil && x.showsBilled() && x.report.Error == "" {
		// What was billed (an estimate, or the upstream's count corrected),
		// as a chat answer and a stream's usage chunk tell it.
		body = rt.BilledUsage(body, x.event.Usage)
	}
	if x.respond(http.StatusOK, false, func(h http.Header) {
		copyHeader(h, resp, "application/json")
		x.setCostHeaders(h)
	}) {
		x.write(body)
	}
}

// noAnswerOf reports whether body, a whole native response body whose
// usage was tapped into x.report, is no answer at all: a JSON object with
// none of its route's answer members (provider.Route.Answer; never, for a
// route without them), and no usage, error or output read from it (an
// upstream's "{}", a proxy's {"detail":...} under a 200). The provider
// reported producing nothing: as an error object under a 200, it bills
// nothing, as on the chat route (exchange.noAnswer).
func (x *exchange) noAnswerOf(body []byte, members []string) bool {
	if r := &x.report; len(members) == 0 || r.Reported || r.Error != "" || r.Output.Len() > 0 {
		return false
	}
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return false
	}
	for _, m := range members {
		if _, ok, err := jsonscan.Member(body, m); err != nil || ok {
			return false
		}
	}
	return true
}

// unreadableBody records that the upstream body x relays whole could not
// be read for its usage (err): the body is relayed, so it is billed, its
// prompt and its bytes as output estimated, never nothing.
func (x *exchange) unreadableBody(body []byte, err error) {
	x.report.Error = "unreadable upstream body: " + err.Error()
	if r := &x.report; !r.Reported && r.Output.Len() == 0 {
		r.AddOutputBytes(body)
	}
}

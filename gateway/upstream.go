package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/anthropic"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// callUpstream sends the upstream request of x (path below the provider's
// base URL, body, and extra headers) and returns the response once its
// headers arrive with status 200, unless its body is a web page (webPage)
// or in a Content-Encoding the gateway cannot read (unaskedCoding).
// Otherwise it answers the client itself (502 unreachable or redirected,
// 504 no answer within connect_timeout, a non-streamed request's
// stall_timeout or what is left of request_timeout, 502 for any other
// status below 400, a web page or an unasked coding, or the upstream's
// own status and error, scrubbed) and returns nil. A client gone already
// (clientHungUp) is not sent upstream: the event is client_cancelled and
// bills nothing, and callUpstream returns nil.
func (s *Server) callUpstream(x *exchange, rt route, path string, body []byte, header http.Header) *http.Response {
	if x.clientGone.Load() || clientHungUp(x.ctx) {
		// The client left before its request went upstream (see
		// clientHungUp): nothing is asked, nothing produced or billed.
		x.clientGone.Store(true)
		x.event.Status, x.event.Error = usage.StatusClientCancelled, errGoneBeforeUpstream.Error()
		return nil
	}
	if x.beginNotJournaled() {
		return nil
	}
	up, err := s.upstreamRequest(x.ctx, rt.provider, path, body, header)
	if err != nil {
		x.fail(http.StatusBadGateway, usage.StatusUpstreamError, err)
		return nil
	}
	wait, waitCause := headerWait(rt.provider, x.event.Stream, x.endBy, time.Since(x.start))
	connect := timerCancel(x, wait, waitCause)
	// The round trip runs aside (see headerFlusher): net/http's client
	// path is about 3 KiB deep, and made from here it would take a
	// stream's handler past its 8 KiB stack for the stream's whole life.
	var resp *http.Response
	tr := s.clientFor(rt.provider)
	s.chains.aside(func() { resp, err = tr.RoundTrip(up) })
	connect.Stop()
	if err != nil {
		switch cause := x.cause(); {
		case errors.Is(cause, errConnectTimeout), errors.Is(cause, errAnswerTimeout), errors.Is(cause, errRequestTimeout):
			x.fail(http.StatusGatewayTimeout, usage.StatusTimeout, cause)
		case x.clientGone.Load():
			x.event.Error = "client gone before the upstream answered"
		default:
			x.unreached = true
			x.fail(http.StatusBadGateway, usage.StatusUpstreamError, errors.New("the upstream could not be reached: "+upstreamErrorText(err)))
		}
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		s.relayUpstreamError(x, rt, resp)
		return nil
	}
	if coding := unaskedCoding(resp.Header); coding != "" {
		resp.Body.Close()
		x.refusedWith = http.StatusBadGateway // metrics: the provider's refusal
		x.fail(http.StatusBadGateway, usage.StatusUpstreamError, errors.New(codingMessage(coding)))
		return nil
	}
	if what := x.webPage(resp); what != "" {
		resp.Body.Close()
		x.refusedWith = http.StatusBadGateway // metrics: the provider's refusal
		x.fail(http.StatusBadGateway, usage.StatusUpstreamError, errors.New(pageMessage(what)))
		return nil
	}
	x.responded = true
	x.untilClose = resp.ProtoMajor == 1 && resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 && !resp.Uncompressed
	x.checkpoint() // the journal learns the upstream answered: it bills from here
	x.body = boundedBody{x: x, body: resp.Body}
	resp.Body = &x.body
	return resp
}

// beginNotJournaled refuses x, 503 metering_unavailable, when the crash
// journal could not write its begin record (its disk filled after the
// request was admitted, or a gateway started on a full disk had not
// written yet, so was not failing at admission): sent upstream, the
// request would have no record that survives the process, and a kill would
// lose what the upstream billed. As a request refused at admission, it
// has no event: nothing went upstream.
func (x *exchange) beginNotJournaled() bool {
	jh, ok := x.s.journal.(JournalHealth)
	if !ok {
		return false
	}
	err := jh.Failing()
	if err == nil {
		return false
	}
	x.committed = true // no event: nothing was asked of the upstream
	x.s.journal.End(x.event.ID)
	x.writeError(provider.Err(http.StatusServiceUnavailable, "service_unavailable", "metering_unavailable",
		"the gateway cannot meter more requests now: its crash journal cannot write ("+err.Error()+")"))
	return true
}

// errGoneBeforeUpstream is the error of the event of a request whose
// client hung up before it went upstream.
var errGoneBeforeUpstream = errors.New("client gone before the request was sent upstream: not sent, nothing billed")

// headerWait is how long an upstream of pc may take to send the headers
// of its answer (streamed or not), and the error it is cut off with: for
// a request (callUpstream) and a token count (countBounds) alike. A
// streamed answer's headers come before its first token; a whole
// answer's come with its body, once the provider has generated all of
// it: bounded by connect_timeout (30s), every non-streamed answer longer
// than that was cut off, 504, and billed nothing, though the provider
// went on to generate (and bill) it. A whole answer gets stall_timeout,
// the bound on an upstream's silence, if that is longer.
//
// request_timeout bounds the whole request, this wait too: endBy, when
// above 0, is what the request may take in all, spent what it has taken
// so far. The stall timer that enforces it is armed only once the headers
// are in, and an upstream that never answered held a request to
// connect_timeout (or stall_timeout, 5m by default) whatever
// request_timeout said.
func headerWait(pc *ProviderConfig, stream bool, endBy, spent time.Duration) (time.Duration, error) {
	wait, cause := pc.ConnectTimeout, errConnectTimeout
	if !stream && pc.StallTimeout > wait {
		wait, cause = pc.StallTimeout, errAnswerTimeout
	}
	return withinRequest(wait, cause, endBy, spent)
}

// withinRequest is wait, and the error it ends with, cut to what is left
// of request_timeout (endBy, when above 0: what the request may take in
// all; spent, what it has taken), errRequestTimeout then.
func withinRequest(wait time.Duration, cause error, endBy, spent time.Duration) (time.Duration, error) {
	if left := endBy - spent; endBy > 0 && left < wait {
		return max(left, 0), errRequestTimeout
	}
	return wait, cause
}

// upstreamRequest is a JSON POST of body to path below pc's base URL, with
// header and the credential of pc's provider type. User info in the base
// URL (https://user:pass@host/v1) becomes basic auth when the credential
// did not take the Authorization header, as an http.Client would make it:
// the request is sent on a transport (see redirected).
func (s *Server) upstreamRequest(ctx context.Context, pc *ProviderConfig, path string, body []byte, header http.Header) (*http.Request, error) {
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, pc.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	up.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		up.Header[k] = v
	}
	if p := s.providers[pc.Type]; p != nil && p.Auth != nil {
		p.Auth(up.Header, pc.APIKey)
	}
	if u := up.URL.User; u != nil && up.Header.Get("Authorization") == "" {
		pass, _ := u.Password()
		up.SetBasicAuth(u.Username(), pass)
	}
	return up, nil
}

// readToEnd reads an upstream body on to its end once its stream has
// ended ([DONE], or the provider's own end: tap.Report.Ended) and the
// client has had its own end: net/http puts an
// HTTP/1.1 connection back in its pool only when its response body was read
// to the end, and closes it otherwise. An upstream sends the body's end (the
// last chunk of the chunked encoding) once its handler returns, just after
// [DONE] and often in a packet of its own, so without this about half of
// the streams cost a new upstream connection (12 of 23 reused, measured
// one stream at a time against upstream-sim). It reads at most
// afterDoneBytes, for at most afterDoneWait; an upstream that sends more,
// or holds the body open, has its connection closed, as before.
func (x *exchange) readToEnd(body io.Reader) {
	t := timerCancel(x, afterDoneWait, errBodyNotEnded)
	_, _ = io.CopyN(io.Discard, body, afterDoneBytes)
	t.Stop()
}

// afterDoneWait (a duration) and afterDoneBytes bound readToEnd.
const (
	afterDoneWait  = 10 * time.Millisecond
	afterDoneBytes = 4 << 10
)

// redirected reports whether the upstream of the provider named name
// answered with a redirect (3xx), which it logs. The gateway sends
// upstream requests on its transports (RoundTrip), not through an
// http.Client, so that it follows no redirect: a client follows
// them by default (up to 10, a POST turned into a GET on 301, 302 and
// 303), which would let an upstream point the gateway, with the request's
// body and headers, at any address, internal ones included, and bill what
// a GET there answered. A redirect is answered as a failed upstream; its
// Location goes to the operator's log only, as it may name an internal
// address, scrubbed of the provider's key (an upstream may echo it there).
// The line names the request and its customer (requestID, customerID), as
// every line about a request does.
func (s *Server) redirected(name, requestID, customerID string, resp *http.Response) bool {
	if resp.StatusCode < 300 || resp.StatusCode > 399 {
		return false
	}
	s.log.Warn("gateway: an upstream answered with a redirect, not followed: is its base_url out of date?",
		"provider", name, "status", resp.StatusCode, "location", s.scrubFor(name, resp.Header.Get("Location")),
		"request_id", requestID, "customer_id", customerID)
	return true
}

// redirectMessage is what a client is told of an upstream's redirect.
func redirectMessage(status int) string {
	return fmt.Sprintf("the upstream provider answered %d, a redirect, which the gateway does not follow: "+
		"its configured address may be out of date", status)
}

// upstreamErrorText is an upstream error's message (a round trip's, or a
// read of its body's) without the URL an http.Client would put in front of
// it (`Post "http://...": dial tcp ...`), and without the network
// addresses of the connection (net.OpError's "dial tcp 10.1.2.3:443" or
// "read tcp 10.0.0.2:51234->10.1.2.3:443"): the address the upstream's
// host resolved to, an internal one for a self-hosted model, becomes
// upstreamMark, and the gateway's own localMark. The host and the
// credentials in the rest are scrubbed by the caller.
func upstreamErrorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	msg := err.Error()
	var op *net.OpError
	if errors.As(err, &op) {
		if op.Addr != nil {
			msg = strings.ReplaceAll(msg, op.Addr.String(), upstreamMark)
		}
		if op.Source != nil {
			msg = strings.ReplaceAll(msg, op.Source.String(), localMark)
		}
	}
	return msg
}

// inOpenAIEnvelope is the error object obj of an upstream refusal with
// status, to be answered in OpenAI's envelope: on the gateway's own
// (OpenAI) routes, x's envelope, served by a provider that speaks another
// protocol (Anthropic's {"type":"error","error":{"type","message"}},
// Gemini's {"error":{"code":429,"message","status"}}). Relayed as it came,
// an OpenAI SDK read Gemini's number code and no type. The message and
// status are the upstream's; the type is its own (Anthropic's names are
// OpenAI's) or the one its status means; the code Gemini's status name,
// else the type. ok is false for an OpenAI upstream or route, or an error
// without a message.
func inOpenAIEnvelope(x *exchange, rt route, status int, obj json.RawMessage) (e provider.Error, ok bool) {
	if x.env != chatErrors || rt.provider.Type == "openai" {
		return e, false
	}
	var upstream struct {
		Message, Type, Status json.RawMessage
	}
	var msg, typ, code string
	if json.Unmarshal(obj, &upstream) != nil || json.Unmarshal(upstream.Message, &msg) != nil || msg == "" {
		return e, false
	}
	if json.Unmarshal(upstream.Type, &typ) != nil || typ == "" {
		typ = anthropic.ErrorType(status)
	}
	if json.Unmarshal(upstream.Status, &code) != nil || code == "" {
		code = typ
	}
	return provider.Err(status, typ, code, msg), true
}

// passedHeaders are the upstream response headers a client's SDK acts on,
// passed through on errors and successes: the provider's backoff and its
// rate-limit state.
func passHeaders(dst, src http.Header) {
	for k, v := range src {
		lk := strings.ToLower(k)
		if lk == "retry-after" || lk == "retry-after-ms" || strings.HasPrefix(lk, "x-ratelimit-") ||
			strings.HasPrefix(lk, "anthropic-ratelimit-") {
			dst[k] = v
		}
	}
}

// relayUpstreamError passes an upstream's refusal to the client with its
// status and its backoff headers: its own body when it is a JSON error
// object, else wrapped in the route's envelope; either way scrubbed of the
// provider's credential and address. What refusalOf reads as the
// deployment's failure goes to the next attempt when one may follow, and
// is answered 502 on the last when refusalOf says what to answer (a 3xx,
// a 2xx but 200, the deployment's key or account refused, its model or
// URL not found).
func (s *Server) relayUpstreamError(x *exchange, rt route, resp *http.Response) {
	var body []byte
	if resp.StatusCode >= 200 { // a 101's body may be the connection itself, which no timer ends
		// Under the stall timer, as any upstream body: read with none, a
		// refusal whose body never ended (a Content-Length never sent)
		// held the request past stall_timeout and request_timeout, and
		// no other deployment was tried. What came is the body.
		body, _ = s.readBody(x, io.LimitReader(resp.Body, 64<<10))
	}
	body = []byte(s.scrubFor(rt.provider.Name, string(body)))
	s.redirected(rt.provider.Name, x.event.ID, x.event.CustomerID, resp) // logs a redirect's Location
	f := s.refusalOf(rt, resp.StatusCode, body)
	x.event.Status = usage.StatusUpstreamError
	x.event.Error = fmt.Sprintf("upstream status %d", resp.StatusCode) + f.why
	switch x.refusedWith = resp.StatusCode; {
	case resp.StatusCode < 400: // no refusal: a misconfigured deployment (metrics)
		x.refusedWith = http.StatusBadGateway
	case resp.StatusCode == http.StatusBadRequest && f.failed:
		// Gemini's refusal of the key, counted as the provider's refusal
		// (metrics kind "refused"), not as the client's invalid request.
		x.refusedWith = http.StatusUnauthorized
	}
	x.clientRefused = f.next
	if f.failed || f.next {
		if f.failed {
			x.upstreamFailed, x.retryAfter = true, retryAfter(resp.Header, time.Now())
		}
		if x.mayRetry() {
			return
		}
	}
	if f.answer != "" {
		x.refusedWith = http.StatusBadGateway
		x.writeError(provider.Err(http.StatusBadGateway, "upstream_error", "upstream_error", f.answer))
		return
	}
	if obj, ok := errorObject(body); ok {
		if e, ok := inOpenAIEnvelope(x, rt, resp.StatusCode, obj); ok {
			x.wmu.Lock()
			passHeaders(x.w.Header(), resp.Header)
			x.wmu.Unlock()
			x.writeError(e)
			return
		}
		if x.respond(resp.StatusCode, false, func(h http.Header) {
			h.Set("Content-Type", "application/json")
			passHeaders(h, resp.Header)
		}) {
			x.write(body)
		}
		return
	}
	x.wmu.Lock()
	passHeaders(x.w.Header(), resp.Header)
	x.wmu.Unlock()
	x.writeError(wrappedRefusal(resp.StatusCode, body))
}

// errorObject is the error object of body, an upstream's refusal, when
// body is a JSON error ({"error":{…}}, as every provider's API answers
// one), which is relayed as it came; ok is false for any other body (a
// proxy's web page, a text/plain 400, nothing), which the client gets
// wrapped (wrappedRefusal): for a request (relayUpstreamError) and a
// token count (countFailure) alike.
func errorObject(body []byte) (obj json.RawMessage, ok bool) {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 || env.Error[0] != '{' {
		return nil, false
	}
	return env.Error, true
}

// wrappedRefusal is the error a client is told, in its route's envelope,
// of an upstream's refusal with status whose body, scrubbed by the
// caller, is no JSON error object (errorObject): the upstream's status,
// and its body's words in the message. Relayed as it came (an nginx HTML
// 503, a text/plain 400), it was no error the client's SDK could read.
func wrappedRefusal(status int, body []byte) provider.Error {
	return provider.Err(status, "upstream_error", "upstream_error",
		fmt.Sprintf("the upstream provider answered %d: %s", status, bytes.TrimSpace(body)))
}

// upstreamRefusal is what an upstream's answer other than 200 says of the
// deployment that sent it (refusalOf).
type upstreamRefusal struct {
	// failed: the deployment's failure, not the client's; the next
	// deployment is tried and this one rests.
	failed bool
	// why is what the answer's error adds to "upstream status N" in the
	// event and the log (": the deployment's model was not found").
	why string
	// answer is what the client is told, with 502, when no deployment is
	// left; "": the upstream's answer reaches it as it came.
	answer string
	// next: the client's request, which another deployment may still
	// take (a larger limit): the next deployment is tried, and this one
	// does not rest.
	next bool
}

// refusalOf reads an upstream's answer of status (not 200), its body
// scrubbed, to an attempt routed as rt: for a request (relayUpstreamError)
// and a token count (countFailure) alike.
//
// A status below 400 is the deployment's failure, answered 502: a
// redirect, which the gateway does not follow (see redirected), or a 2xx
// but 200 (202 Accepted from a queue, 204 from a proxy): nothing was
// served, and no API the gateway speaks answers so. Relayed, the client
// read a success status with an error object, or no body, for its answer.
//
// A 401 is the deployment's key refused (the gateway sends its own), a
// 402 its account unable to pay (Anthropic's billing_error: the
// operator's account, never the client's): the deployment's failure, as a
// 408, 429 or 5xx is (transientStatus), which another deployment may not
// share; so is Gemini's 400 that names the key (keyRefusal), and a 404
// that says the deployment's model is not found (deploymentModelGone) or
// its path is not there (deploymentURLGone). Any other 403 or 404 can be
// the client's request (a beta it may not use, a previous_response_id
// unknown) and goes to the client as it came, resting nothing. A 429
// that says the request is too large for the deployment's per-minute limit
// (tooLargeForLimit) is the client's too, but another deployment may take
// it: the next one is tried, and this one does not rest.
//
// On the last attempt a 408, 429 or 5xx is relayed, which the client's
// SDK retries; the others are answered 502 saying what failed. Relayed,
// the 401 (OpenAI's invalid_api_key, Anthropic's authentication_error)
// read as the gateway refusing the client's own key, which it had just
// accepted, and a 402 as the gateway refusing its customer's balance; the
// 404 of the deployment's model told the client that the model it asked
// for, which the gateway lists and serves, does not exist, and the 404 of
// its URL that a path it never chose (the gateway's, below the
// deployment's base_url) was not there, or, as Anthropic's "Not found"
// reads, that what it asked for was not: every request drawn to the
// deployment got it.
func (s *Server) refusalOf(rt route, status int, body []byte) upstreamRefusal {
	switch {
	case status >= 300 && status <= 399:
		return upstreamRefusal{failed: true, why: ": a redirect, not followed", answer: redirectMessage(status)}
	case status < 400:
		return upstreamRefusal{failed: true, why: ": not an answer",
			answer: fmt.Sprintf("the upstream provider answered %d, which is not an answer: %s", status, bytes.TrimSpace(body))}
	case status == http.StatusUnauthorized, status == http.StatusPaymentRequired:
		return upstreamRefusal{failed: true, answer: credentialsMessage(status)}
	case status == http.StatusBadRequest && keyRefusal(body):
		return upstreamRefusal{failed: true, why: ": the deployment's API key refused", answer: credentialsMessage(status)}
	case status == http.StatusNotFound && s.deploymentModelGone(rt, body):
		return upstreamRefusal{failed: true, why: ": the deployment's model was not found", answer: modelGoneMessage(rt.model)}
	case status == http.StatusNotFound && s.deploymentURLGone(rt, body):
		return upstreamRefusal{failed: true, why: ": the deployment's URL was not found", answer: urlGoneMessage(rt.model)}
	case status == http.StatusTooManyRequests && tooLargeForLimit(body):
		return upstreamRefusal{next: true, why: ": the request is too large for the deployment's per-minute limit"}
	}
	return upstreamRefusal{failed: transientStatus(status)}
}

// tooLargeForLimit reports whether body, an upstream's 429, is OpenAI's
// refusal of a request whose own tokens pass the organization's
// per-minute limit ("Request too large for gpt-4o in organization … on
// tokens per min (TPM): Limit 30000, Requested 36278. The input or output
// tokens must be reduced …"): no wait cures it, and the client's prompt,
// not the deployment's load, drew it. Taken as the deployment's failure,
// a client sending such a prompt once a cool-down rested every deployment
// of a model for every customer. Anchored at the message's start, as
// saysModelNotFound's rules are, so that no echo of a client's words
// matches; its "Rate limit reached for …" (the deployment's load) does not.
func tooLargeForLimit(body []byte) bool {
	msg, _, _ := errorWords(body)
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(msg)), "request too large for ")
}

// credentialsMessage is what a client is told of an upstream's refusal,
// with status (401, 402, or Gemini's 400), of the deployment's key or
// account: the event and the log say "upstream status 401" (or 402, 400).
func credentialsMessage(status int) string {
	return fmt.Sprintf("the upstream provider refused the gateway's credentials or account for this model's deployment (%d); the gateway's operator must fix them", status)
}

// deploymentModelGone reports whether body, an upstream's 404 to an
// attempt routed as rt, is the deployment's own failure: rt's model is
// one of the table's, for which the gateway chose the upstream model
// (the deployment's upstream_model), and the 404 says that model is not
// found (saysModelNotFound: retired, mistyped, not enabled for the
// deployment's account), naming it: a model the client named elsewhere
// in its request (a tool's) is the client's. A "provider/model" name outside the table is
// the client's choice of upstream model: its 404 is the client's answer.
func (s *Server) deploymentModelGone(rt route, body []byte) bool {
	_, table := s.routes.models[rt.model]
	return table && saysModelNotFound(body, rt.upstream)
}

// deploymentURLGone reports whether body, an upstream's 404 to an attempt
// routed as rt, says the deployment's URL is wrong: rt's model is one of
// the table's, for which the gateway chose the path and the upstream
// model, and the 404 says the path is not there (saysPathNotFound: its
// base_url lacks its version, or names another server). On a
// "provider/model" name outside the table the 404 is relayed, as
// deploymentModelGone's is: the client chose that name, and on Gemini
// the path holds it.
func (s *Server) deploymentURLGone(rt route, body []byte) bool {
	_, table := s.routes.models[rt.model]
	return table && saysPathNotFound(body)
}

// modelGoneMessage and urlGoneMessage are what a client is told of a 404
// saying the deployment's model (deploymentModelGone), or its URL
// (deploymentURLGone), of model was not found.
func modelGoneMessage(model string) string {
	return fmt.Sprintf("the upstream provider answered 404 for the model of this deployment of %q: the deployment's model was not found; the gateway's operator must fix the deployment", model)
}

func urlGoneMessage(model string) string {
	return fmt.Sprintf("the upstream provider answered 404 for the URL of this deployment of %q: the deployment's URL was not found; the gateway's operator must check its base_url", model)
}

// transientStatus reports whether status, an upstream's refusal, says
// the deployment failed for now, whatever the request: 408 Request
// Timeout, 429 Too Many Requests or a 5xx. The providers' own SDKs retry
// these (openai-go's and anthropic-sdk-go's shouldRetry,
// internal/requestconfig: 408, 409, 429, >= 500; their Python and Node
// SDKs alike): another deployment is tried and this one rests. Relayed, a
// 408 from a deployment timing out behind its load balancer reached every
// client drawn to it, none tried elsewhere and the deployment never
// resting; on the last attempt the client still gets it as it came, which
// its SDK retries. A 409 Conflict, which the SDKs retry too, is left out:
// what conflicts is the client's own (a conversation or response it
// named, busy with another of its requests), and as the deployment's
// failure it would let a client rest a model's deployments for everyone.
func transientStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// maxAnswer bounds what the gateway reads of one upstream answer at a
// time, in bytes: a whole non-streamed body (readBody), and one event of
// a stream (the relays' SSE readers). 64 MiB holds the largest answers
// providers send in one piece, generated images in base64 (a 4K PNG is
// some 20 MiB, and the Responses API's response.completed repeats every
// image beside the usage), so that a streamed answer is no more bounded
// than the same answer not streamed. Not every answer: OpenAI's largest
// embeddings request (2,048 inputs of text-embedding-3-large's 3,072
// values) answers about 80 MiB as float text, 32 MiB as base64 (the
// SDKs' default); docs/operations.md, "Limits", says so.
const maxAnswer = 64 << 20

// readBody reads a whole upstream body (at most maxAnswer; a longer one is
// errAnswerTooLarge) under the stall timer, which bounds the silence
// between its bytes (Gemini's array-form streamGenerateContent sends its
// elements as they are generated), not the time the whole body takes. A UTF-8 byte order mark at its start
// (which some proxies write, and JSON's RFC 8259 has ignored) is dropped:
// left in, it made every decoder refuse the answer, whose usage was then
// estimated, or the answer refused 502 where it is translated.
func (s *Server) readBody(x *exchange, body io.Reader) ([]byte, error) {
	x.stallOff.Store(false) // stopped between an embeddings request's batches
	x.armStall()
	b, err := io.ReadAll(io.LimitReader(touchReader{x, body}, maxAnswer+1))
	if err != nil && x.cause() != nil {
		err = x.cause()
	}
	if err == nil && len(b) > maxAnswer {
		return nil, errAnswerTooLarge
	}
	b = bytes.TrimPrefix(b, utf8BOM)
	if err == nil {
		b = dropTail(b)
		if x.untilClose && cutJSON(b) {
			err = errCutAtClose
		}
	}
	return b, err
}

// dropTail returns b, a whole body, without the bytes that follow its
// JSON object or array when they begin no JSON value (a proxy's NUL
// padding, a stray word or comment after the closing brace): every
// decoder, the gateway's and its clients', refused the answer for them,
// so that its usage was estimated, or the answer refused 502, or a chat
// stream's client given an error event in place of the answer the usage
// was billed for. A second value after the first (two answers, or JSON
// lines) is left for the routes to read as they do, and so is a body
// that begins no JSON value or whose value does not end. Only a body
// that does not end as an object or array does (past blanks) is decoded
// to find its end.
func dropTail(b []byte) []byte {
	t := bytes.TrimRight(b, " \t\r\n")
	if !jsonStart(b) || t[len(t)-1] == '}' || t[len(t)-1] == ']' {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if dec.Decode(&skipValue{}) != nil {
		return b
	}
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(b[end:], " \t\r\n"); len(rest) > 0 && (rest[0] == '{' || rest[0] == '[') {
		return b
	}
	return b[:end]
}

// skipValue decodes a JSON value into nothing (the decoder checks it).
type skipValue struct{}

func (*skipValue) UnmarshalJSON([]byte) error { return nil }

// cutJSON reports whether b begins a JSON object or array that ends
// before its value does (its first value incomplete; what follows a
// whole value is not looked at).
func cutJSON(b []byte) bool {
	if !jsonStart(b) || json.Valid(b) {
		return false
	}
	err := json.NewDecoder(bytes.NewReader(b)).Decode(new(json.RawMessage))
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// errCutAtClose is readBody's error for a body ended by the connection's
// close (untilClose) whose JSON ends before its value does: the answer
// was cut off, as a body short of its Content-Length is (and is failed
// as that one is), though its framing cannot show it. Relayed, the client
// got a 200 of JSON it cannot parse, and was billed its bytes as output.
var errCutAtClose = fmt.Errorf("the upstream closed the connection before the end of its answer's JSON: %w", io.ErrUnexpectedEOF)

// errAnswerTooLarge is readBody's error for a body past maxAnswer: read
// as if it ended there, it was relayed cut off (a 200 of broken JSON, or
// an error event) and its 64 MiB billed as output, estimated. It fails the
// attempt as a body cut off mid-way does, billing none of its output.
var errAnswerTooLarge = errors.New("the upstream's answer passed 64 MiB, the gateway's bound on a whole body")

// utf8BOM is the UTF-8 byte order mark, U+FEFF.
var utf8BOM = []byte("\ufeff")

// failure is the status to answer and record for an upstream that failed
// after its headers: 504 and timeout when it stalled, else 502.
func (x *exchange) failure() (int, usage.Status) {
	if errors.Is(x.cause(), errStalled) {
		return http.StatusGatewayTimeout, usage.StatusTimeout
	}
	return http.StatusBadGateway, usage.StatusUpstreamError
}

// touchReader is an upstream body whose every read that brings bytes
// tells the stall timer the upstream is not silent: a request's whole
// body (an exchange's timer), or a token count's (countBound).
type touchReader struct {
	t interface{ touch() }
	r io.Reader
}

func (t touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.t.touch()
	}
	return n, err
}

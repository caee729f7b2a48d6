package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// readRequest reads a request body up to MaxRequestBytes, answering 413 or
// 400 in env itself when it cannot. Once the body is read, the listener's
// ReadTimeout no longer applies: the response may stream for as long as
// the upstream does.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, env provider.Envelope) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			env.WriteError(w, provider.Err(http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("the request body exceeds the limit of %d bytes", tooBig.Limit)))
			return nil, false
		}
		env.WriteError(w, badRequest("reading the request body: "+err.Error()))
		return nil, false
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	if !s.recheckKey(w, r, env) { // a body held back: the key as it is now
		return nil, false
	}
	return body, true
}

func badRequest(msg string) provider.Error {
	return provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request", msg)
}

func modelNotFound(model string) provider.Error {
	return provider.Err(http.StatusNotFound, "invalid_request_error", "model_not_found",
		fmt.Sprintf("the model %q does not exist or you do not have access to it", model))
}

func modelNotAllowed(model string) provider.Error {
	return provider.Err(http.StatusForbidden, "invalid_request_error", "model_not_allowed",
		fmt.Sprintf("this API key may not use the model %q (its allowed_models)", model))
}

// allowedModel reports whether key k may use the model asked for, routed
// as rt: its allowed_models is empty, or names the model as asked or as
// routed, or rt's deployment as "provider/upstream model" (the name a
// client may ask for it by), or its provider as "provider/*".
func allowedModel(k *usage.KeyState, asked string, rt route) bool {
	if k == nil || len(k.AllowedModels) == 0 {
		return true
	}
	p := rt.provider.Name
	for _, m := range k.AllowedModels {
		if m == asked || m == rt.model {
			return true
		}
		if rest, ok := strings.CutPrefix(m, p); ok && len(rest) > 1 && rest[0] == '/' && (rest[1:] == "*" || rest[1:] == rt.upstream) {
			return true
		}
	}
	return false
}

// checkModel refuses (400) a model name a usage event could not carry as
// it is: invalid UTF-8, control characters (NUL among them), or longer
// than usage.MaxModelLen bytes.
func checkModel(model string) error {
	if err := usage.CheckString(model, usage.MaxModelLen); err != nil {
		return fmt.Errorf("model: %v", err)
	}
	for _, c := range model {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("model: contains a control character (%U)", c)
		}
	}
	return nil
}

// chatCompletions serves POST /v1/chat/completions: passed through to
// OpenAI-compatible upstreams, translated for the others.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readRequest(w, r, chatErrors)
	if !ok {
		return
	}
	req, err := parseChatRequest(body)
	if err == nil {
		err = req.checkPassedKeys(body)
	}
	if err == nil {
		err = checkModel(req.model)
	}
	if err != nil {
		chatErrors.WriteError(w, badRequest(err.Error()))
		return
	}
	rt, ok := s.permittedRoute(w, r, req.model)
	if !ok {
		return
	}
	endUser := stringField(req.fields["safety_identifier"])
	if endUser == "" {
		endUser = stringField(req.fields["user"])
	}
	endUser, tags, err := attribution(r, endUser, req.fields["metadata"])
	if err != nil {
		chatErrors.WriteError(w, badRequest(err.Error()))
		return
	}
	key := keyOf(r)
	attempts, err := s.prepareAttempts(key, rt, func(model string, d *deployment) bool {
		return allowedModel(key, model, deploymentRoute(model, d))
	}, func(a attempt) (string, []byte, error) {
		if tr := s.providers[a.dep.provider.Type].Chat; tr != nil {
			return tr.Request(body, a.dep.upstream, req.stream)
		}
		b, err := req.upstreamBody(a.dep.upstream) // OpenAI-compatible: passed through
		return "/chat/completions", b, err
	})
	if err != nil {
		chatErrors.WriteError(w, attemptsError(err))
		return
	}
	messages, defs := req.fields["messages"], chatDefs(req.fields) // not req: a stream keeps only what an estimate needs
	s.serveAttempts(w, r, attempts, "/v1/chat/completions", req.stream, chatErrors, func(x *exchange, p prepared) {
		x.event.EndUser, x.event.Metadata = endUser, tags
		x.promptText = func() tap.Prompt { return chatPromptText(messages, defs...) }
		x.oneChoice = req.oneChoice()
		x.begin(body)
		resp := s.callUpstream(x, p.route(), p.path, p.body, nil)
		if resp == nil {
			return
		}
		defer resp.Body.Close()
		tr := s.providers[p.dep.provider.Type].Chat
		switch {
		case req.stream && jsonAnswer(resp.Header):
			s.relayAnswerAsStream(x, resp, tr, req.includeUsage, req.model)
		case req.stream:
			s.relayChatStream(x, resp, req.includeUsage, req.model, tr)
		default:
			s.relayChatBody(x, resp, tr, req.model)
		}
	})
}

// relayChatBody answers a non-streamed chat completion: the upstream's
// body unchanged when it speaks OpenAI (its usage tapped), else
// translated. The event is durable before the body is sent.
func (s *Server) relayChatBody(x *exchange, resp *http.Response, tr provider.Chat, model string) {
	body, err := s.readBody(x, resp.Body)
	err = x.emptyBody(body, err)
	body, ok := x.translateBody(body, err, tr, model)
	if !ok {
		return
	}
	ambiguous := false
	if tr == nil {
		if c, err := parseAnswer(body); err == nil {
			var tp openai.ChatTap
			tp.Chunk(c, &x.report)
			x.report.Final = x.report.Reported
			ambiguous = c.AmbiguousUsage
			if x.noAnswer(body, c) {
				x.report.Error = errNoAnswer // relayed as it came, as an error object is
			}
		} else if streamAnswer(resp.Header, body) {
			tapStreamAnswer(body, &x.report)
		} else {
			x.unreadableBody(body, err)
		}
		if x.errorUnder200(body) {
			return // an error object, the provider's failure: the next attempt serves
		}
	}
	ct := answerType(resp.Header.Get("Content-Type"), "application/json")
	if tr != nil {
		ct = "application/json"
	}
	x.firstByte()
	x.markComplete()
	x.httpStatusOK()
	if !x.commitAnswer() {
		return
	}
	if ambiguous || usage.HasCorrection(x.event.Corrections, usage.CorrectionReasoningOutsideCompletion) ||
		!reportedAsBilled(x.event) && x.report.Error == "" {
		// Every client reads what was billed: an estimate too (the
		// upstream reported no usage, or not all of it), or counts the
		// gateway corrected (clamped, as reportedAsBilled lists them), as
		// a stream's usage chunk and an embeddings answer carry it; a
		// non-streamed answer always has usage in OpenAI's API. An error
		// body gets none.
		body = x.billedUsage(body)
	}
	body = x.withCost(body)
	if x.respond(http.StatusOK, false, func(h http.Header) {
		h.Set("Content-Type", ct)
		passHeaders(h, resp.Header)
		x.setCostHeaders(h)
	}) {
		x.write(body)
	}
}

// translateBody translates a chat answer's body, read with err, into
// OpenAI's shape by tr (nil when the upstream speaks OpenAI), its usage
// into x.report. On a read or translation error it fails the exchange and
// returns false. A body that is the provider's error object (tr.Body
// sets x.report.Error) fails it as well, a 502, but is the deployment's
// failure (failover, cool-down) only when the error names the provider's
// side (serverSide), as an error object under a 200 is on every route.
func (x *exchange) translateBody(body []byte, err error, tr provider.Chat, model string) ([]byte, bool) {
	raw := body
	if err == nil && tr != nil {
		body, err = tr.Body(raw, "chatcmpl-"+x.event.ID, model, x.start.Unix(), &x.report)
	}
	if err != nil {
		status, eventStatus := x.failure()
		if tr != nil && x.report.Error != "" && !serverSide(raw) && err != errEmptyBody {
			x.failHere(status, eventStatus, err)
			return nil, false
		}
		x.fail(status, eventStatus, err)
		return nil, false
	}
	return body, true
}

// httpStatusOK records, before the event is committed, that the response
// about to be sent is a 200: only for an answer marked complete
// (markComplete) while its client was there. A client that left before
// it (client_cancelled, its answer drained for the usage) is sent nothing,
// and its event's http_status stays 0, as a stream's whose client left
// before the status line (usage.Event.HTTPStatus: 0 if none was sent).
func (x *exchange) httpStatusOK() {
	x.wmu.Lock()
	if x.httpStatus == 0 && !x.cut && x.complete.Load() {
		x.httpStatus = http.StatusOK
	}
	x.wmu.Unlock()
}

// permittedRoute resolves model for a request on an OpenAI endpoint and
// checks the key may use it, answering 404 (model_not_found) or 403 in
// OpenAI's envelope when not; ok=false then.
func (s *Server) permittedRoute(w http.ResponseWriter, r *http.Request, model string) (rt route, ok bool) {
	rt, err := s.routes.resolve(model)
	if err != nil {
		chatErrors.WriteError(w, modelNotFound(model))
		return rt, false
	}
	if !allowedModel(keyOf(r), model, rt) {
		chatErrors.WriteError(w, modelNotAllowed(model))
		return rt, false
	}
	return rt, true
}

package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// readRequest reads a request body up to MaxRequestBytes, answering 413 or
// 400 itself when it cannot.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, fail errorWriter) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("the request body exceeds the limit of %d bytes", tooBig.Limit))
			return nil, false
		}
		fail(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", "reading the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

func modelNotFound(w http.ResponseWriter, fail errorWriter, model string) {
	fail(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
		fmt.Sprintf("the model %q does not exist or you do not have access to it", model))
}

// chatCompletions serves POST /v1/chat/completions: passed through to
// OpenAI-compatible upstreams, translated for the others.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readRequest(w, r, writeError)
	if !ok {
		return
	}
	req, err := parseChatRequest(body)
	if err != nil {
		errInvalidRequest(w, err.Error())
		return
	}
	rt, err := s.routes.resolve(req.model)
	if err != nil {
		modelNotFound(w, writeError, req.model)
		return
	}
	p := rt.provider
	url, upBody, header, tr := "", []byte(nil), func(h http.Header) {}, chatUpstream(nil)
	if p.Type == "openai" {
		url = p.BaseURL + "/chat/completions"
		upBody, err = req.upstreamBody(rt.upstream)
		header = func(h http.Header) {
			if p.APIKey != "" {
				h.Set("Authorization", "Bearer "+p.APIKey)
			}
		}
	} else {
		tr = s.translators[p.Type]
		var path string
		path, upBody, err = tr.Request(body, rt.upstream, req.stream)
		url = p.BaseURL + path
		header = func(h http.Header) { tr.Header(h, p.APIKey) }
	}
	if err != nil {
		errInvalidRequest(w, err.Error())
		return
	}
	x := s.newExchange(w, r, rt, "/v1/chat/completions", req.stream)
	defer x.finish()
	messages := req.fields["messages"] // not req: a stream keeps only what an estimate needs
	x.promptText = func() string { return chatPromptText(messages) }
	resp := s.callUpstream(w, x, rt, url, upBody, header, writeError)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	switch {
	case req.stream && tr == nil:
		s.relayChatStream(w, x, resp.Body, req.includeUsage, req.model, nil)
	case req.stream:
		s.relayChatStream(w, x, resp.Body, req.includeUsage, req.model,
			tr.NewStream("chatcmpl-"+x.event.ID, req.model, x.start.Unix()))
	case tr == nil:
		s.relayChatBody(w, x, resp)
	default:
		s.translateChatBody(w, x, resp, tr, req.model)
	}
}

// translateChatBody answers a non-streamed chat completion from a provider
// whose format is not OpenAI's.
func (s *Server) translateChatBody(w http.ResponseWriter, x *exchange, resp *http.Response, tr chatUpstream, model string) {
	body, err := s.readBody(x, resp.Body)
	if err == nil {
		body, err = tr.Body(body, "chatcmpl-"+x.event.ID, model, x.start.Unix(), &x.report)
	}
	if err != nil {
		status, eventStatus := x.failure()
		x.fail(w, writeError, status, eventStatus, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	x.event.HTTPStatus = http.StatusOK
	x.firstByte()
	x.markComplete()
	if _, err := w.Write(body); err != nil {
		x.clientGone.Store(true)
	}
}

package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter"
)

var (
	errConnectTimeout = errors.New("upstream did not answer within connect_timeout")
	errDrainTimeout   = errors.New("client gone and upstream usage did not arrive within drain_timeout")
)

// exchange is one upstream request in flight: the event being built and
// what the relay learns about the client.
type exchange struct {
	start      time.Time
	event      *meter.Event
	clientGone atomic.Bool
	usageSeen  bool
}

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	who := r.Context().Value(principalKey{}).(principal)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("the request body exceeds the limit of %d bytes", tooBig.Limit))
			return
		}
		errInvalidRequest(w, "reading the request body: "+err.Error())
		return
	}
	req, err := parseChatRequest(body)
	if err != nil {
		errInvalidRequest(w, err.Error())
		return
	}
	rt, err := s.routes.resolve(req.model)
	if err != nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
			fmt.Sprintf("the model %q does not exist or you do not have access to it", req.model))
		return
	}
	upBody, err := req.upstreamBody(rt.upstream)
	if err != nil {
		errInvalidRequest(w, err.Error())
		return
	}
	id, _ := uuid.NewV7()
	x := &exchange{start: start, event: &meter.Event{
		Version: meter.SchemaVersion, ID: id.String(), Time: start.UTC(),
		CustomerID: who.customerID, KeyID: who.keyID, Provider: rt.provider.Name, Model: rt.model,
		Endpoint: "/v1/chat/completions", Stream: req.stream, Status: meter.StatusOK,
		UsageSource: meter.SourceEstimated,
	}}
	w.Header().Set("X-Request-Id", x.event.ID)
	defer s.finish(x)

	// The upstream request outlives its client: after a disconnect the
	// gateway keeps reading, for at most DrainTimeout, to learn the usage.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cancel(nil)
	stopWatch := context.AfterFunc(r.Context(), func() {
		x.clientGone.Store(true)
		time.AfterFunc(s.cfg.DrainTimeout, func() { cancel(errDrainTimeout) })
	})
	defer stopWatch()

	up, err := http.NewRequestWithContext(ctx, http.MethodPost, rt.provider.BaseURL+"/chat/completions", bytes.NewReader(upBody))
	if err != nil {
		s.failBeforeResponse(w, x, http.StatusBadGateway, meter.StatusUpstreamError, err)
		return
	}
	up.Header.Set("Content-Type", "application/json")
	if rt.provider.APIKey != "" {
		up.Header.Set("Authorization", "Bearer "+rt.provider.APIKey)
	}
	if req.stream {
		up.Header.Set("Accept", "text/event-stream")
	}
	connectTimer := time.AfterFunc(rt.provider.ConnectTimeout, func() { cancel(errConnectTimeout) })
	resp, err := s.client.Do(up)
	connectTimer.Stop()
	if err != nil {
		if errors.Is(context.Cause(ctx), errConnectTimeout) {
			s.failBeforeResponse(w, x, http.StatusGatewayTimeout, meter.StatusTimeout, errConnectTimeout)
			return
		}
		s.failBeforeResponse(w, x, http.StatusBadGateway, meter.StatusUpstreamError, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.relayUpstreamError(w, x, resp)
		return
	}
	if req.stream {
		s.relayStream(ctx, w, x, resp.Body, req.includeUsage)
	} else {
		s.relayBody(w, x, resp)
	}
	if x.clientGone.Load() && x.event.Status == meter.StatusOK {
		x.event.Status = meter.StatusClientCancelled
	}
}

// finish completes the event and hands it on.
func (s *Server) finish(x *exchange) {
	x.event.DurationMillis = time.Since(x.start).Milliseconds()
	if x.usageSeen {
		x.event.UsageSource = meter.SourceUpstream
	}
	s.emit(x.event)
}

// failBeforeResponse answers the client with an error when the upstream
// could not be reached, and records why.
func (s *Server) failBeforeResponse(w http.ResponseWriter, x *exchange, status int, eventStatus string, err error) {
	x.event.Status, x.event.HTTPStatus, x.event.Error = eventStatus, status, err.Error()
	writeError(w, status, "upstream_error", "upstream_unavailable", "the upstream provider did not answer: "+err.Error())
}

// relayUpstreamError passes an upstream's refusal to the client with its
// status, in OpenAI's error envelope.
func (s *Server) relayUpstreamError(w http.ResponseWriter, x *exchange, resp *http.Response) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	x.event.Status, x.event.HTTPStatus = meter.StatusUpstreamError, resp.StatusCode
	x.event.Error = fmt.Sprintf("upstream status %d", resp.StatusCode)
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 && env.Error[0] == '{' {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return
	}
	writeError(w, resp.StatusCode, "upstream_error", "upstream_error",
		fmt.Sprintf("the upstream provider answered %d: %s", resp.StatusCode, bytes.TrimSpace(body)))
}

package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tollgate-dev/tollgate/meter"
)

// errorWriter answers a client with an error in its protocol's envelope.
type errorWriter func(w http.ResponseWriter, status int, typ, code, msg string)

// callUpstream sends the upstream request of x and returns the response
// once its headers arrive with status 200. Otherwise it answers the client
// itself (502 unreachable, 504 no answer within connect_timeout, or the
// upstream's own status and error) and returns nil.
func (s *Server) callUpstream(w http.ResponseWriter, x *exchange, rt route, url string, body []byte,
	header func(http.Header), fail errorWriter) *http.Response {
	up, err := http.NewRequestWithContext(x.ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		x.fail(w, fail, http.StatusBadGateway, meter.StatusUpstreamError, err)
		return nil
	}
	up.Header.Set("Content-Type", "application/json")
	header(up.Header)
	connect := timerCancel(x, rt.provider.ConnectTimeout, errConnectTimeout)
	resp, err := s.client.Do(up)
	connect.Stop()
	if err != nil {
		switch cause := x.cause(); {
		case errors.Is(cause, errConnectTimeout):
			x.fail(w, fail, http.StatusGatewayTimeout, meter.StatusTimeout, cause)
		case x.clientGone.Load():
			x.event.Error = "client gone before the upstream answered"
		default:
			x.fail(w, fail, http.StatusBadGateway, meter.StatusUpstreamError, err)
		}
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		s.relayUpstreamError(w, x, resp, fail)
		return nil
	}
	x.responded = true
	return resp
}

// fail answers the client with an error and records it on the event.
func (x *exchange) fail(w http.ResponseWriter, fail errorWriter, status int, eventStatus string, err error) {
	x.event.Status, x.event.HTTPStatus, x.event.Error = eventStatus, status, err.Error()
	code := "upstream_error"
	if status == http.StatusGatewayTimeout {
		code = "upstream_timeout"
	}
	fail(w, status, "upstream_error", code, "the upstream provider failed: "+err.Error())
}

// relayUpstreamError passes an upstream's refusal to the client with its
// status: its own body when it is a JSON error object, else wrapped.
func (s *Server) relayUpstreamError(w http.ResponseWriter, x *exchange, resp *http.Response, fail errorWriter) {
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
	fail(w, resp.StatusCode, "upstream_error", "upstream_error",
		fmt.Sprintf("the upstream provider answered %d: %s", resp.StatusCode, bytes.TrimSpace(body)))
}

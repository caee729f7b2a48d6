package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger/api"
)

// handlerTransport is an http.RoundTripper that serves each request with
// an http.Handler in-process: the console's and the portal's API calls
// run the API's own handlers, authentication included, without a socket.
// checked marks each request's token as checked before
// (api.CheckedToken): a signed-in session's.
type handlerTransport struct {
	h       http.Handler
	checked bool
}

func (t handlerTransport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	rec := api.NewRecorder(http.Header{})
	defer func() {
		if p := recover(); p != nil { // an aborted answer (http.ErrAbortHandler)
			resp, err = nil, fmt.Errorf("%s %s: the API aborted its answer: %v", req.Method, req.URL.Path, p)
		}
	}()
	if req.Body == nil {
		req.Body = http.NoBody
	}
	// The caller's chi routing state must not leak in: a chi router that
	// finds one routes by its path, not by this request's.
	ctx := context.WithValue(req.Context(), chi.RouteCtxKey, nil)
	if t.checked {
		ctx = api.CheckedToken(ctx)
	}
	req = req.WithContext(ctx)
	if addr, ok := req.Context().Value(browserAddrKey{}).(string); ok {
		req.RemoteAddr = addr // the API's logs (a failed sign-in) name the browser, not ""
	}
	t.h.ServeHTTP(rec, req)
	status := rec.Status
	if status == 0 { // a handler that wrote nothing answered 200
		status = http.StatusOK
	}
	rec.Header().Set("Content-Length", strconv.Itoa(rec.Body.Len()))
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: rec.Header(),
		Body: io.NopCloser(&rec.Body), ContentLength: int64(rec.Body.Len()), Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// inProcess returns an http.Client whose requests h serves.
func inProcess(h http.Handler) *http.Client {
	return &http.Client{Transport: handlerTransport{h: h}}
}

// inProcessChecked is inProcess for the calls of a signed-in session,
// whose token was checked at its sign-in (api.CheckedToken): the wrong
// tokens other browsers send from its address (behind a proxy, every
// browser's) do not refuse them.
func inProcessChecked(h http.Handler) *http.Client {
	return &http.Client{Transport: handlerTransport{h: h, checked: true}}
}

// browserAddrKey is the context key of the browser's address (browserAddr).
type browserAddrKey struct{}

// browserAddr keeps the browser's address in the request's context, for
// handlerTransport to give the in-process API requests made for it: a
// wrong token at the console's sign-in was logged with remote_addr "".
func browserAddr(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), browserAddrKey{}, r.RemoteAddr)))
	})
}

package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Client calls the admin API (/admin/v1) with the admin token.
//
// An error answer comes back as a *ledger.Error with the code and message
// the server answered (the code from the body, or from the status through
// the table the server uses), so that ledger.ErrorCode works on either
// side. Besides the codes each method lists, any method can return
// EUnauthorized (a missing or wrong token), EInternal (the server failed;
// its log says why) and, when it gets no answer at all, an
// *UnreachableError, or a *NoAnswerError when it sent a change (a
// method other than GET) whole and the connection ended before an answer.
type Client struct {
	base, token string
	http        *http.Client
}

// NewClient returns a client of the admin API at baseURL (for example
// http://127.0.0.1:8081) that sends token; hc nil means http.DefaultClient.
func NewClient(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: hc}
}

// WaitHealthy polls GET /healthz until it answers 200, and returns an error
// when limit passes first or ctx ends: an *UnreachableError when the last
// try could not connect (the CLI's exit code 7), else one naming the
// status the server answered.
func (c *Client) WaitHealthy(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/healthz", nil)
		if err != nil {
			return &UnreachableError{URL: c.base, Err: err}
		}
		resp, err := c.http.Do(req)
		status := 0
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			status = resp.StatusCode
		}
		if time.Now().After(deadline) {
			if err != nil {
				return &UnreachableError{URL: c.base, Err: fmt.Errorf("still after %s: %w", limit, err)}
			}
			return fmt.Errorf("admin API at %s not healthy after %s: GET /healthz answered %d", c.base, limit, status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// do sends in (JSON, when not nil) and decodes a JSON answer into out
// (when not nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.open(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// open sends a request and returns a 2xx answer with its body unread (the
// caller closes it); an error answer is a *ledger.Error.
func (c *Client) open(ctx context.Context, method, path string, in any) (*http.Response, error) {
	return c.openAccepting(ctx, method, path, in, "")
}

// openAccepting is open asking for the media type accept ("": any).
func (c *Client) openAccepting(ctx context.Context, method, path string, in any, accept string) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, &UnreachableError{URL: c.base, Err: err}
	}
	if c.token != "" {
		// Without a token (TOLLGATE_ADMIN_TOKEN unset) no header: the
		// API refuses it all the same, but does not count "Bearer " as
		// a wrong guess against this address.
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// Whether the request was sent whole: a change sent and not answered
	// (the server died after taking it) may have been made.
	var sent atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { sent.Store(i.Err == nil) },
	}))
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if sent.Load() && method != http.MethodGet && method != http.MethodHead {
			return nil, &NoAnswerError{URL: c.base, Method: method, Path: path, Err: err}
		}
		return nil, &UnreachableError{URL: c.base, Err: err}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return nil, answerError(resp.StatusCode, b)
	}
	return resp, nil
}

// download streams a GET's answer into w and returns how many bytes it
// wrote. A stream cut short is an error saying after how many bytes.
func (c *Client) download(ctx context.Context, path string, w io.Writer) (int64, error) {
	resp, err := c.open(ctx, "GET", path, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("the download stopped after %d bytes: %w", n, err)
	}
	return n, nil
}

// seg escapes an id for a path segment.
func seg(id string) string { return url.PathEscape(id) }

// query encodes the non-empty name, value pairs as "?a=b&c=d" ("" for none).
func query(pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// timeParam formats t for a query or body ("" for the zero time).
func timeParam(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// adminClient calls the admin API (/admin/v1) with the admin token. It is
// the only way the CLI reaches the ledger: never Postgres directly.
type adminClient struct {
	base, token string
	// http is the client used; nil means http.DefaultClient.
	http *http.Client
}

// apiError is an admin API answer other than 2xx: its HTTP status and the
// API's message (error.message in the body, or the status text).
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return e.Message }

// unreachableError is a request that got no HTTP answer at all: connection
// refused, DNS failure, TLS failure, timeout.
type unreachableError struct {
	base string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the admin API at %s: %v", e.base, rootCause(e.err))
}

func (e *unreachableError) Unwrap() error { return e.err }

// rootCause is the innermost error of a chain, for short messages
// ("connection refused" rather than the whole dial chain).
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func (c *adminClient) client() *http.Client {
	if c.http != nil {
		return c.http
	}
	return http.DefaultClient
}

// waitHealthy polls GET /healthz until it answers 200 or limit passes.
func (c *adminClient) waitHealthy(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/healthz", nil)
		resp, err := c.client().Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("admin API at %s not healthy after %s: %v", c.base, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// do sends a JSON request and decodes a JSON answer into out (when out is
// not nil). A non-2xx answer is an *apiError; no answer an
// *unreachableError.
func (c *adminClient) do(ctx context.Context, method, path string, in, out any) error {
	b, err := c.raw(ctx, method, path, in)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// raw is do without decoding: it returns the answer's body.
func (c *adminClient) raw(ctx context.Context, method, path string, in any) ([]byte, error) {
	resp, err := c.open(ctx, method, path, in)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return b, nil
}

// open sends a request and returns the response of a 2xx answer with its
// body unread (the caller closes it), for streaming.
func (c *adminClient) open(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, body)
	if err != nil {
		return nil, &unreachableError{base: c.base, err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &unreachableError{base: c.base, err: err}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return nil, &apiError{Status: resp.StatusCode, Message: errorMessage(resp.StatusCode, b)}
	}
	return resp, nil
}

// errorMessage is the API's error.message, or a short rendering of a body
// that does not carry one.
func errorMessage(status int, body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	msg := strings.TrimSpace(string(body))
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return fmt.Sprintf("%s (HTTP %d)", msg, status)
}

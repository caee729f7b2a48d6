package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// demo seeds a running server with a demo customer (reused across runs)
// and a fresh API key, and prints curl commands that use them.
func demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	adminURL := fs.String("admin-url", "http://127.0.0.1:8081", "admin API base URL")
	gatewayURL := fs.String("gateway-url", "http://127.0.0.1:8080", "LLM API base URL")
	model := fs.String("model", "sim-pro", "model for the example request")
	name := fs.String("customer", "demo", "demo customer name")
	if err := fs.Parse(args); err != nil {
		return err
	}
	token := os.Getenv("TOLLGATE_ADMIN_TOKEN")
	c := &adminClient{base: *adminURL, token: token}
	if err := c.waitHealthy(ctx, 30*time.Second); err != nil {
		return err
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := c.do(ctx, "GET", "/admin/v1/customers?name="+url.QueryEscape(*name), nil, &list); err != nil {
		return err
	}
	var customerID string
	if len(list.Data) > 0 {
		customerID = list.Data[0].ID
	} else {
		var created struct {
			ID string `json:"id"`
		}
		if err := c.do(ctx, "POST", "/admin/v1/customers", map[string]string{"name": *name}, &created); err != nil {
			return err
		}
		customerID = created.ID
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := c.do(ctx, "POST", "/admin/v1/customers/"+customerID+"/keys", map[string]string{"name": "demo " + time.Now().UTC().Format(time.RFC3339)}, &key); err != nil {
		return err
	}
	fmt.Printf(`
Tollgate is running. Demo customer %s, new API key %s

Stream a chat completion through the gateway (usage is metered whether or not you ask for it):

  curl -N %s/v1/chat/completions \
    -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \
    -d '{"model":"%s","stream":true,"stream_options":{"include_usage":true},"max_tokens":24,"metadata":{"sim_delay_ms":"80"},"messages":[{"role":"user","content":"Say hello to the ledger"}]}'

Then see what it cost, from the ledger:

  curl -s '%s/admin/v1/usage?customer_id=%s&group_by=model' -H 'Authorization: Bearer %s'

`, customerID, key.Key, *gatewayURL, key.Key, *model, *adminURL, customerID, token)
	return nil
}

// adminClient calls the admin API.
type adminClient struct {
	base, token string
}

func (c *adminClient) waitHealthy(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
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

// do sends a JSON request and decodes a JSON answer into out; a non-2xx
// answer becomes an error carrying the API's message.
func (c *adminClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

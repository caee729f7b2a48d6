package main

import (
	"context"
	"flag"
	"fmt"
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

package main

import (
	"github.com/tollgate-dev/tollgate/gateway/anthropic"
	"github.com/tollgate-dev/tollgate/gateway/gemini"
	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
)

// providers is the registry of upstream protocols the gateway serves: each
// one value, from its own package.
func providers() []provider.Provider {
	return []provider.Provider{openai.Provider(), anthropic.Provider(), gemini.Provider()}
}

// providerTypes are the provider types a configuration may name.
func providerTypes() []string {
	var out []string
	for _, p := range providers() {
		out = append(out, p.Type)
	}
	return out
}

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/routing/provider"
)

// pluginProvider is an LLM provider served by a plugin
// (models.providers.<id>: { api: plugin, plugin: <name> }): the router
// uses it like any provider (failover, cooldowns, semaphores, ledger).
// ext is nil outside `opentalon run`, where no plugin runs.
type pluginProvider struct {
	id, plugin string
	timeout    time.Duration
	ext        *plugins.Extensions
}

var _ provider.Provider = pluginProvider{}

func (p pluginProvider) ID() string { return p.id }

func (p pluginProvider) request(cred provider.Credentials, req *provider.Request) plugins.ProviderRequest {
	return plugins.ProviderRequest{Model: req.Model, System: req.System, Messages: req.Messages, Tools: req.Tools,
		MaxTokens: req.MaxTokens, Temperature: req.Temperature, APIKey: cred.APIKey}
}

func (p pluginProvider) check() error {
	if p.ext == nil {
		return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("models.providers.%s is served by plugin %s, which runs only under opentalon run", p.id, p.plugin)}
	}
	return nil
}

func response(r plugins.ProviderResponse) *provider.Response {
	return &provider.Response{Text: r.Text, ToolCalls: r.ToolCalls, Usage: r.Usage, Model: r.Model, StopReason: r.StopReason}
}

// Complete implements provider.Provider.
func (p pluginProvider) Complete(ctx context.Context, cred provider.Credentials, req *provider.Request) (*provider.Response, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	r, err := p.ext.Complete(ctx, p.plugin, p.request(cred, req))
	if err != nil {
		return nil, provider.HideSecrets(err, cred.APIKey)
	}
	return response(r), nil
}

// Stream implements provider.Provider.
func (p pluginProvider) Stream(ctx context.Context, cred provider.Credentials, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	r, err := p.ext.Stream(ctx, p.plugin, p.request(cred, req), onText)
	if err != nil {
		// The plugin's error may quote the key it was given (a vendor
		// SDK's error quoting the URL it called with ?key=).
		return nil, provider.HideSecrets(err, cred.APIKey)
	}
	return response(r), nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

// providerCheckTimeout bounds the start-up check of the providers.
const providerCheckTimeout = 5 * time.Second

// providerProblem is what the check found wrong with one provider.
type providerProblem struct {
	Provider string
	// Fatal means no answer can come from the provider as configured: it
	// cannot be reached, or it refused the credential.
	Fatal bool
	// Refused says the provider refused the credential.
	Refused bool
	Msg     string // what is wrong and the fix
}

func (p providerProblem) String() string { return "provider " + p.Provider + ": " + p.Msg }

// checkProviders asks each configured provider for its list of models
// (GET <base_url>/models; no tokens are spent) with its first credential:
// a provider that cannot be reached or refuses the credential is Fatal,
// and a catalog model it does not list is a warning. A server without the
// list (404 and the like) tells nothing and is let be. Providers served
// by a plugin, or with an OAuth credential, are not asked.
func checkProviders(ctx context.Context, cfg *config.Config, timeout time.Duration) []providerProblem {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	profiles, _ := authProfiles(cfg) // doctor reports a bad file
	// One request per provider, no connection kept open afterwards.
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}
	var mu sync.Mutex
	var out []providerProblem
	var wg sync.WaitGroup
	for _, id := range slices.Sorted(maps.Keys(cfg.Models.Providers)) {
		p := cfg.Models.Providers[id]
		key := p.APIKey.Value()
		if ps := profiles[id]; len(ps) > 0 {
			if ps[0].OAuth {
				continue
			}
			key = string(ps[0].Key)
		}
		if p.API != config.APIOpenAICompletions && p.API != config.APIAnthropicMessages {
			continue
		}
		wg.Go(func() {
			ps := checkProvider(ctx, client, cfg, id, p, key)
			mu.Lock()
			out = append(out, ps...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b providerProblem) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// modelsURL is where a provider lists its models.
func modelsURL(p config.Provider) string {
	switch p.API {
	case config.APIAnthropicMessages:
		return provider.JoinURL(provider.AnthropicBase(p.BaseURL), "/v1/models")
	default:
		return provider.JoinURL(cmpOr(p.BaseURL, provider.OpenAIDefaultBaseURL), "/models")
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func checkProvider(ctx context.Context, client *http.Client, cfg *config.Config, id string, p config.Provider, key string) []providerProblem {
	target := modelsURL(p)
	// The URLs as shown: a credential in the base URL (?key=,
	// user:password@) is "***".
	u := core.RedactURL(target)
	base := core.RedactURL(cmpOr(p.BaseURL, strings.TrimSuffix(target, "/models")))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return []providerProblem{{Provider: id, Fatal: true, Msg: fmt.Sprintf("base URL %q: %v; %s", core.RedactURL(p.BaseURL), err, urlFix(id, p))}}
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v.Value())
	}
	if key != "" {
		if p.API == config.APIAnthropicMessages {
			req.Header.Set("x-api-key", key)
		} else {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	if p.API == config.APIAnthropicMessages {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in the message already
		}
		return []providerProblem{{Provider: id, Fatal: true, Msg: fmt.Sprintf("cannot reach %s (%v); %s", base, err, urlFix(id, p))}}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return []providerProblem{{Provider: id, Fatal: true, Refused: true, Msg: fmt.Sprintf("%s refused the credential (%s); %s", base, resp.Status, keyFix(id, p))}}
	case resp.StatusCode == http.StatusForbidden:
		// A key may answer chats without the right to list models (an
		// OpenAI key restricted per endpoint): nothing to tell.
		return nil
	case resp.StatusCode == http.StatusNotFound && p.API == config.APIOpenAICompletions && !strings.HasSuffix(strings.TrimRight(base, "/"), "/v1"):
		return []providerProblem{{Provider: id, Msg: fmt.Sprintf("%s has no %s (404): an OpenAI-compatible base URL usually ends in /v1 (http://localhost:11434/v1 for Ollama); %s", base, u, urlFix(id, p))}}
	case resp.StatusCode != http.StatusOK:
		return nil // no model list here: nothing to tell
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list); err != nil || len(list.Data) == 0 {
		return nil
	}
	served := map[string]bool{}
	var ids []string
	for _, m := range list.Data {
		served[m.ID] = true
		ids = append(ids, m.ID)
	}
	var out []providerProblem
	for _, ref := range catalogRefs(cfg, id) {
		_, model, _ := strings.Cut(ref, "/")
		// Ollama lists "llama3.2:latest" for "llama3.2".
		if served[model] || served[model+":latest"] {
			continue
		}
		fix := "check the model id in models.catalog and routing"
		if p.KeyVar != "" || p.URLVar != "" {
			fix = "set OPENTALON_MODEL to one it serves"
		}
		shown := ids
		if len(shown) > 8 {
			shown = append(shown[:8:8], "…")
		}
		out = append(out, providerProblem{Provider: id, Msg: fmt.Sprintf("model %s is not among the models %s lists (%s); %s", ref, u, strings.Join(shown, ", "), fix)})
	}
	return out
}

// catalogRefs are the model references of provider id the router may
// choose: the catalog's and those routing and the channels name.
func catalogRefs(cfg *config.Config, id string) []string {
	seen := map[string]bool{}
	for ref := range cfg.Models.Catalog {
		seen[ref] = true
	}
	for _, mr := range cfg.ModelRefs() {
		if ref, ok := cfg.ResolveModel(mr.Ref); ok {
			seen[ref] = true
		}
	}
	var out []string
	for _, ref := range slices.Sorted(maps.Keys(seen)) {
		if p, _, _ := strings.Cut(ref, "/"); p == id {
			out = append(out, ref)
		}
	}
	return out
}

// urlFix says what to change when a provider cannot be reached: the
// environment variable it came from, or its config key.
func urlFix(id string, p config.Provider) string {
	// The shape of the URL, for the API the provider speaks.
	shape := " (an OpenAI-compatible URL includes /v1, e.g. http://localhost:11434/v1 for Ollama)"
	if p.API == config.APIAnthropicMessages {
		shape = " (an Anthropic-compatible server, with or without /v1, e.g. https://api.anthropic.com)"
	}
	switch {
	case p.URLVar != "" && p.BaseURL != "":
		return fmt.Sprintf("start that server, or set %s to the URL of one that runs%s", p.URLVar, shape)
	case p.URLVar != "":
		return fmt.Sprintf("check the network, or set %s to a server this machine reaches%s", p.URLVar, shape)
	}
	return fmt.Sprintf("check models.providers.%s.base_url and that the server runs", id)
}

// keyFix says what to change when a provider refuses the credential.
func keyFix(id string, p config.Provider) string {
	switch {
	case p.KeyVar != "" && p.APIKey == "":
		return fmt.Sprintf("the server asks for a key: set %s to it", p.KeyVar)
	case p.KeyVar != "":
		return fmt.Sprintf("set %s to a valid key", p.KeyVar)
	}
	return fmt.Sprintf("check models.providers.%s.api_key (or its profiles in auth.profiles_file)", id)
}

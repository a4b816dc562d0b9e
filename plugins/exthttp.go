package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
	pluginpb "github.com/opentalon/opentalon/proto"
)

// RoutePattern is the http.ServeMux pattern the plugin routes are served
// under (see Extensions.HTTPHandler).
const RoutePattern = "/api/plugins/{plugin}/{path...}"

// Injection is a message a plugin's HTTP handler puts into a
// conversation.
type Injection struct {
	Plugin   string
	Channel  string
	Chat     string
	Thread   string
	Text     string
	UserID   string
	UserName string
	// ID makes the injection idempotent ("" = always new).
	ID string
}

// HTTPOptions configure the plugin route handler.
type HTTPOptions struct {
	// APIKey is server.api_key: a route that is not public needs it (as
	// X-API-Key or "Authorization: Bearer"), or the credential of the
	// plugin that declared the route (Plugins); with neither, those
	// routes are refused.
	APIKey  string
	Plugins *Credentials
	// MaxBody bounds a request body (plugins.tools.http.max_body_bytes,
	// default 1 MiB); Timeout one call (plugins.tools.http.timeout,
	// default 10s).
	MaxBody int64
	Timeout time.Duration
	// Inject commits one message a handler injected (gateway.Gateway.Inject);
	// nil refuses injections.
	Inject func(ctx context.Context, in Injection) error
	Logger *slog.Logger
}

// hopHeaders are not passed on in either direction; the API key never
// reaches a plugin.
var hopHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Content-Length": true, "Authorization": true, "X-Api-Key": true}

// HTTPHandler serves the plugins' routes at RoutePattern: it finds the
// route the plugin declared, checks the API key unless the route is
// public, bounds the body and the time, forwards the request over gRPC
// (HandleHTTP) with the route it matched, commits the messages the plugin
// injects when it answers a success, and only then answers with the
// plugin's response.
func (x *Extensions) HTTPHandler(o HTTPOptions) http.Handler {
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	log := x.log
	if o.Logger != nil {
		log = o.Logger.With("component", "plugin-http")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, path := r.PathValue("plugin"), r.PathValue("path")
		p, ok := x.get(name)
		if !ok || len(p.cap.Routes) == 0 {
			httpError(w, http.StatusNotFound, fmt.Sprintf("no running plugin %q serves HTTP routes", name))
			return
		}
		if !plainPath(path) {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("the path %q has an empty, \".\" or \"..\" segment (perhaps escaped); send the plain path", path))
			return
		}
		if strings.Contains(path, "%") {
			// Escaped twice: the plugin would unescape it again, into a
			// path the core did not check (%252e%252e is ..).
			httpError(w, http.StatusBadRequest, fmt.Sprintf("the path %q still holds a %% once decoded (escaped twice); send it escaped once", path))
			return
		}
		route, allowed := matchRoute(p.cap.Routes, r.Method, path)
		if route == nil {
			if len(allowed) > 0 {
				w.Header().Set("Allow", strings.Join(allowed, ", "))
				httpError(w, http.StatusMethodNotAllowed, fmt.Sprintf("plugin %s serves %s with %s", name, path, strings.Join(allowed, ", ")))
				return
			}
			httpError(w, http.StatusNotFound, fmt.Sprintf("plugin %s has no route %q", name, path))
			return
		}
		if !route.Public {
			keys := Keys{Operator: o.APIKey, Plugins: o.Plugins}
			if !keys.any() {
				httpError(w, http.StatusUnauthorized, "this route needs server.api_key, which is not set: set it (e.g. api_key: \"${OPENTALON_API_KEY}\") to enable the plugins' routes")
				return
			}
			// The operator's key opens every private route; a plugin's own
			// credential opens only its own.
			if caller, operator, ok := keys.caller(r); !ok || !operator && caller != name {
				w.Header().Set("WWW-Authenticate", `Bearer realm="opentalon"`)
				httpError(w, http.StatusUnauthorized, "missing or wrong API key: send server.api_key as the X-API-Key header or as Authorization: Bearer <key> (a plugin's own key opens only its own routes)")
				return
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, o.MaxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes (plugins.tools.http.max_body_bytes)", o.MaxBody))
				return
			}
			httpError(w, http.StatusBadRequest, "reading the body: "+err.Error())
			return
		}
		req := &pluginpb.HTTPRequest{Method: r.Method, Path: path, Query: r.URL.RawQuery, Body: body, RemoteAddr: r.RemoteAddr,
			RouteMethod: route.Method, RoutePath: route.Path}
		for k, vs := range r.Header {
			if hopHeaders[http.CanonicalHeaderKey(k)] {
				continue
			}
			for _, v := range vs {
				req.Headers = append(req.Headers, &pluginpb.Header{Name: k, Value: v})
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), o.Timeout)
		defer cancel()
		resp, err := p.http.HandleHTTP(ctx, req)
		if err != nil {
			if r.Context().Err() != nil {
				return // the client went away
			}
			err = callError(name, "HandleHTTP", err)
			log.Warn("plugin route failed", "plugin", name, "path", path, "err", err)
			if core.ErrorKind(err) == core.KindTimeout {
				httpError(w, http.StatusGatewayTimeout, fmt.Sprintf("plugin %s did not answer within %s (plugins.tools.http.timeout)", name, o.Timeout))
				return
			}
			httpError(w, http.StatusBadGateway, fmt.Sprintf("plugin %s failed to answer; see the OpenTalon log", name))
			return
		}
		status := int(resp.GetStatus())
		if status == 0 {
			status = http.StatusOK
		}
		if status < 100 || status > 599 {
			log.Warn("plugin answered an invalid HTTP status", "plugin", name, "status", status)
			httpError(w, http.StatusBadGateway, fmt.Sprintf("plugin %s answered the invalid status %d", name, status))
			return
		}
		// Injections go with a success only: the caller retries an error,
		// and would queue them again.
		if inj := resp.GetInject(); len(inj) > 0 && status >= 400 {
			log.Warn("a plugin answered an error with messages to inject; they were not queued", "plugin", name, "status", status, "messages", len(inj))
		} else {
			for i, m := range inj {
				if status, msg := inject(ctx, o, name, m); status != 0 {
					log.Warn("a plugin's injected message was not queued", "plugin", name, "channel", m.GetChannel(), "queued_before", i, "err", msg)
					httpError(w, status, msg)
					return
				}
			}
		}
		for _, h := range resp.GetHeaders() {
			if k := http.CanonicalHeaderKey(h.GetName()); k != "" && !hopHeaders[k] {
				w.Header().Add(k, h.GetValue())
			}
		}
		w.WriteHeader(status)
		w.Write(resp.GetBody())
	})
}

// inject commits one injected message; it returns the HTTP status and
// message of a refusal (0 when queued).
func inject(ctx context.Context, o HTTPOptions, plugin string, m *pluginpb.InjectMessage) (int, string) {
	if o.Inject == nil {
		return http.StatusInternalServerError, "this gateway takes no injected messages"
	}
	err := o.Inject(ctx, Injection{Plugin: plugin, Channel: m.GetChannel(), Chat: m.GetChat(), Thread: m.GetThread(), Text: m.GetText(),
		UserID: m.GetUserId(), UserName: m.GetUserName(), ID: m.GetId()})
	switch {
	case err == nil:
		return 0, ""
	case errors.Is(err, core.ErrConversationFull):
		return http.StatusTooManyRequests, "the conversation has too many messages waiting; try again later"
	case core.ErrorKind(err) == core.KindInvalid:
		return http.StatusInternalServerError, fmt.Sprintf("plugin %s injected a message the gateway cannot take: %v", plugin, err)
	}
	return http.StatusServiceUnavailable, "the message could not be queued; try again"
}

// plainPath reports whether path (unescaped, below the plugin's name)
// has no empty, "." or ".." segment but a trailing slash: the mux cleans
// only the raw path, so an escaped "%2e%2e" or "%2F" would otherwise
// reach the plugin as a path outside the route it matched.
func plainPath(path string) bool {
	if path == "" {
		return true
	}
	for _, seg := range strings.Split(strings.TrimSuffix(path, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// RefuseDotSegments answers 400 to a request below /api/plugins/ whose
// path holds an empty, "." or ".." segment, as HTTPHandler does for the
// escaped ones. Wrap the server's whole http.ServeMux with it: the mux
// would otherwise answer such a path with a redirect to its cleaned form
// before HTTPHandler sees it, not with the 400 docs/plugins.md promises.
func RefuseDotSegments(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/api/plugins/"); ok && !plainPath(rest) {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("the path %q has an empty, \".\" or \"..\" segment (perhaps escaped); send the plain path", rest))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// matchRoute finds the route for method and path: the route with the
// most specific path (an exact path before the same path with a trailing
// slash, before a subtree; a longer subtree before a shorter one),
// whatever the order they were declared in, so a route below a public
// subtree keeps its own access rule. When that path's routes declare
// other methods only, it returns none and those methods (405): a method
// a private route does not declare never falls through to a public
// subtree above it.
func matchRoute(routes []Route, method, path string) (*Route, []string) {
	best := -1
	for _, rt := range routes {
		best = max(best, pathScore(rt.Path, path))
	}
	if best < 0 {
		return nil, nil
	}
	var allowed []string
	for i, rt := range routes {
		if pathScore(rt.Path, path) != best {
			continue
		}
		if rt.Method == "" || rt.Method == method || rt.Method == http.MethodGet && method == http.MethodHead {
			return &routes[i], nil
		}
		allowed = append(allowed, rt.Method)
	}
	return nil, allowed
}

// pathScore says how specifically a route's path matches path (higher is
// more specific), or -1 when it does not match.
func pathScore(route, path string) int {
	subtree := strings.HasSuffix(route, "/")
	switch {
	case path == route:
		return 2*len(route) + 2
	case !subtree && path == route+"/":
		return 2*len(route) + 1
	case subtree && strings.HasPrefix(path, route):
		return 2 * len(route)
	}
	return -1
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

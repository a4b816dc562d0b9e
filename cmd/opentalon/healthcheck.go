package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/opentalon/opentalon/config"
)

// cmdHealthcheck implements `opentalon healthcheck`: GET /healthz of the
// gateway on server.listen (a wildcard host is asked on loopback) and exit
// 0 on 200. It is the container image's HEALTHCHECK, which has no curl.
func cmdHealthcheck(ctx context.Context, g *globalFlags, args []string, stdio Stdio, env config.Env, _ *slog.Logger) error {
	rest, err := parseSub("healthcheck", g, args, stdio, nil)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{fmt.Sprintf("healthcheck takes no arguments, got %q; usage: opentalon healthcheck", rest)}
	}
	cfg, err := loadConfigFor(g, env, "server")
	if err != nil {
		return err
	}
	if cfg.Server.Listen == "" {
		return fmt.Errorf("server.listen is empty, so there is no /healthz to ask; set server.listen")
	}
	host, port, err := net.SplitHostPort(cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("server.listen %q: %w", cfg.Server.Listen, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + "/healthz"
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s %s", url, resp.Status, body)
	}
	fmt.Fprintf(stdio.Out, "healthy: %s\n", url)
	return nil
}

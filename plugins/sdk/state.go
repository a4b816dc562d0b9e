package sdk

import (
	"context"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pluginpb "github.com/opentalon/opentalon/proto"
)

// State is the plugin's private key-value store, served by the core. The
// namespace is the plugin's: there is no way to name another.
type State struct {
	conn *grpc.ClientConn
	c    pluginpb.PluginStateClient
}

// OpenState connects to the socket named by OPENTALON_STATE_SOCKET. The
// core accepts state calls once the plugin has answered Capabilities.
func OpenState() (*State, error) {
	path := os.Getenv(EnvStateSocket)
	if path == "" {
		return nil, fmt.Errorf("%s is not set: run this plugin under the OpenTalon core (or plugintest)", EnvStateSocket)
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connect to plugin state at %s: %w", path, err)
	}
	return &State{conn: conn, c: pluginpb.NewPluginStateClient(conn)}, nil
}

// Get returns the value of key; found=false when it is not set.
func (s *State) Get(ctx context.Context, key string) (value string, found bool, err error) {
	r, err := s.c.Get(ctx, &pluginpb.StateGetRequest{Key: key})
	if err != nil {
		return "", false, fmt.Errorf("state get %q: %w", key, err)
	}
	return r.GetValue(), r.GetFound(), nil
}

// Set stores value under key.
func (s *State) Set(ctx context.Context, key, value string) error {
	if _, err := s.c.Set(ctx, &pluginpb.StateSetRequest{Key: key, Value: value}); err != nil {
		return fmt.Errorf("state set %q: %w", key, err)
	}
	return nil
}

// Delete removes key (a missing key is not an error).
func (s *State) Delete(ctx context.Context, key string) error {
	if _, err := s.c.Delete(ctx, &pluginpb.StateDeleteRequest{Key: key}); err != nil {
		return fmt.Errorf("state delete %q: %w", key, err)
	}
	return nil
}

// Keys lists the keys starting with prefix ("" = all), sorted.
func (s *State) Keys(ctx context.Context, prefix string) ([]string, error) {
	r, err := s.c.Keys(ctx, &pluginpb.StateKeysRequest{Prefix: prefix})
	if err != nil {
		return nil, fmt.Errorf("state keys %q: %w", prefix, err)
	}
	return r.GetKeys(), nil
}

// Close closes the connection.
func (s *State) Close() error { return s.conn.Close() }

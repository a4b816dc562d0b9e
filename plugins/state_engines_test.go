package plugins

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pluginpb "github.com/opentalon/opentalon/proto"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestStateBytesOnBothEngines: through the state service's gRPC, a
// plugin's value with NUL bytes round-trips on SQLite and PostgreSQL; a
// key PostgreSQL cannot hold is refused with InvalidArgument naming the
// NUL byte, never an opaque internal error. (Invalid UTF-8 cannot reach
// the service: protobuf strings refuse it on the plugin's side.)
func TestStateBytesOnBothEngines(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			o := store.Options{}
			if engine == "postgres" {
				o.Postgres = &store.Postgres{DSN: pgtest.DSN(t)}
			}
			db, err := store.Open(context.Background(), t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			s := newStateServer(db, StateLimits{}, time.Now, testLogger(t))
			s.bind("bytes")
			sock := filepath.Join(t.TempDir(), "state.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			srv := newStateGRPC(s)
			go srv.Serve(l)
			defer srv.Stop()
			c, err := stateClient(sock)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			value := "head\x00tail\x00"
			if _, err := c.Set(ctx, &pluginpb.StateSetRequest{Key: "k", Value: value}); err != nil {
				t.Fatal(err)
			}
			got, err := c.Get(ctx, &pluginpb.StateGetRequest{Key: "k"})
			if err != nil || !got.GetFound() || got.GetValue() != value {
				t.Fatalf("get = %q (found %v), %v; want the value with its NUL bytes", got.GetValue(), got.GetFound(), err)
			}
			_, err = c.Set(ctx, &pluginpb.StateSetRequest{Key: "k\x00ey", Value: "v"})
			switch {
			case err == nil && engine == "sqlite":
			case status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "NUL byte"):
			default:
				t.Fatalf("a key with a NUL byte: %v; want it stored (SQLite) or InvalidArgument naming the NUL byte", err)
			}
		})
	}
}

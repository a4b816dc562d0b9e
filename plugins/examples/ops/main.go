package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/plugins/sdk"
)

// directory is ops.json next to the binary.
type directory struct {
	// Users may talk to the bot; Admins too, and use admin commands.
	// Each entry is "<channel>:<user id>".
	Users  []string `json:"users"`
	Admins []string `json:"admins"`
}

// maxAlerts bounds the events kept.
const maxAlerts = 50

type ops struct {
	dir directory
	st  *sdk.State
	mu  sync.Mutex
}

func (o *ops) Capabilities() sdk.Capabilities {
	return sdk.Capabilities{
		Name:        "ops",
		Description: "The gateway's recent operator alerts.",
		Actions:     []sdk.Action{{Name: "recent_alerts", Description: "List the gateway's recent operator alerts (outages, failures, budget)."}},
	}
}

// Execute lists the alerts kept, newest first.
func (o *ops) Execute(ctx context.Context, c sdk.Call) (string, error) {
	if c.Action != "recent_alerts" {
		return "", fmt.Errorf("unknown action %q: use recent_alerts", c.Action)
	}
	keys, err := o.st.Keys(ctx, "alert/")
	if err != nil {
		return "", err
	}
	if len(keys) == 0 {
		return "No alerts.", nil
	}
	slices.Reverse(keys)
	var lines []string
	for _, k := range keys {
		v, _, err := o.st.Get(ctx, k)
		if err != nil {
			return "", err
		}
		lines = append(lines, v)
	}
	return strings.Join(lines, "\n"), nil
}

// Notify keeps the event (the newest maxAlerts).
func (o *ops) Notify(ctx context.Context, n sdk.Notification) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	line := fmt.Sprintf("%s %s (%s): %s", n.At.UTC().Format(time.RFC3339), n.Kind, n.Subject, n.Message)
	if err := o.st.Set(ctx, fmt.Sprintf("alert/%020d", n.At.UnixNano()), line); err != nil {
		return err
	}
	keys, err := o.st.Keys(ctx, "alert/")
	if err != nil {
		return err
	}
	for len(keys) > maxAlerts {
		if err := o.st.Delete(ctx, keys[0]); err != nil {
			return err
		}
		keys = keys[1:]
	}
	return nil
}

// Authorize answers from the directory: admin, allow, else deny.
func (o *ops) Authorize(_ context.Context, r sdk.AuthRequest) (sdk.Decision, error) {
	who := r.Channel + ":" + r.UserID
	switch {
	case slices.Contains(o.dir.Admins, who):
		return sdk.Admin, nil
	case slices.Contains(o.dir.Users, who):
		return sdk.Allow, nil
	}
	return sdk.Deny, nil
}

// chunk is how much of a blob goes into one state value: the state
// service takes values well under 1 MiB.
const chunk = 256 << 10

// PutBlob, GetBlob and DeleteBlob keep blobs in the plugin's state,
// base64-encoded in chunks (within plugins.tools.state's quota):
// "blob/<key>" holds the number of chunks, "blob/<key>#<n>" each one.
func (o *ops) PutBlob(ctx context.Context, key string, data []byte) error {
	if err := o.DeleteBlob(ctx, key); err != nil {
		return err
	}
	n := 0
	for off := 0; off == 0 || off < len(data); off += chunk {
		part := data[off:min(off+chunk, len(data))]
		if err := o.st.Set(ctx, fmt.Sprintf("blob/%s#%d", key, n), base64.StdEncoding.EncodeToString(part)); err != nil {
			return err
		}
		n++
	}
	return o.st.Set(ctx, "blob/"+key, strconv.Itoa(n))
}

func (o *ops) GetBlob(ctx context.Context, key string) ([]byte, bool, error) {
	v, ok, err := o.st.Get(ctx, "blob/"+key)
	if err != nil || !ok {
		return nil, ok, err
	}
	n, _ := strconv.Atoi(v)
	var out []byte
	for i := range n {
		p, _, err := o.st.Get(ctx, fmt.Sprintf("blob/%s#%d", key, i))
		if err != nil {
			return nil, false, err
		}
		b, err := base64.StdEncoding.DecodeString(p)
		if err != nil {
			return nil, false, err
		}
		out = append(out, b...)
	}
	return out, true, nil
}

func (o *ops) DeleteBlob(ctx context.Context, key string) error {
	v, ok, err := o.st.Get(ctx, "blob/"+key)
	if err != nil || !ok {
		return err
	}
	n, _ := strconv.Atoi(v)
	for i := range n {
		if err := o.st.Delete(ctx, fmt.Sprintf("blob/%s#%d", key, i)); err != nil {
			return err
		}
	}
	return o.st.Delete(ctx, "blob/"+key)
}

func main() {
	o := &ops{}
	exe, err := os.Executable()
	if err == nil {
		var b []byte
		if b, err = os.ReadFile(filepath.Join(filepath.Dir(exe), "ops.json")); err == nil {
			err = json.Unmarshal(b, &o.dir)
		} else if os.IsNotExist(err) {
			err = nil // nobody is allowed
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ops: ops.json:", err)
		os.Exit(1)
	}
	if o.st, err = sdk.OpenState(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := sdk.Serve(o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

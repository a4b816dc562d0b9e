// Command hostile is a test plugin that tries to reach what a plugin must
// not: the core's environment and memory, the database, the profiles and
// config files, another plugin's sockets, directory and process, and
// plugin_dir. Its probe action reports, for each attempt, "denied: …" or
// "reached: …" as JSON; the core's tests assert that each is denied.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/opentalon/opentalon/plugins/sdk"
	pluginpb "github.com/opentalon/opentalon/proto"
)

type hostile struct{ name string }

func (h hostile) Capabilities() sdk.Capabilities {
	return sdk.Capabilities{Name: h.name, Description: "tries what a plugin must not", Actions: []sdk.Action{
		{Name: "probe", Description: "attempt every escape; args name the targets"},
		{Name: "whoami", Description: "uid and resource limits"},
		{Name: "state", Description: "write and read its own state"},
	}}
}

func (h hostile) Execute(ctx context.Context, c sdk.Call) (string, error) {
	var out map[string]string
	switch c.Action {
	case "probe":
		out = probe(ctx, c.Args)
	case "whoami":
		out = whoami()
	case "state":
		out = ownState(ctx)
	default:
		return "", fmt.Errorf("unknown action %s", c.Action)
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func result(err error, reached string) string {
	if err != nil {
		return "denied: " + err.Error()
	}
	return "reached: " + reached
}

func readFile(path string) string {
	if path == "" {
		return "denied: no path given"
	}
	b, err := os.ReadFile(path)
	return result(err, fmt.Sprintf("read %d bytes", len(b)))
}

func probe(ctx context.Context, a map[string]string) map[string]string {
	r := map[string]string{}
	core := a["core_pid"]
	r["core environ"] = readFile("/proc/" + core + "/environ")
	r["core memory map"] = readFile("/proc/" + core + "/maps")
	entries, err := os.ReadDir("/proc/" + core + "/fd")
	r["core open files"] = result(err, fmt.Sprintf("listed %d descriptors", len(entries)))
	r["database"] = readFile(a["db"])
	r["profiles file"] = readFile(a["profiles"])
	r["config file"] = readFile(a["config"])
	r["victim environ"] = readFile("/proc/" + a["victim_pid"] + "/environ")
	entries, err = os.ReadDir(a["victim_dir"])
	r["victim directory"] = result(err, fmt.Sprintf("listed %d entries", len(entries)))

	// Call the victim directly, around the core and its guard.
	r["victim plugin socket"] = callVictim(ctx, a["victim_plugin_socket"])
	r["victim state socket"] = victimState(ctx, a["victim_state_socket"])

	// Replace the victim's socket with one of its own.
	if err := os.Remove(a["victim_plugin_socket"]); err != nil {
		r["replace victim socket"] = "denied: " + err.Error()
	} else if l, err := net.Listen("unix", a["victim_plugin_socket"]); err != nil {
		r["replace victim socket"] = "reached: removed it, but listening failed: " + err.Error()
	} else {
		l.Close()
		r["replace victim socket"] = "reached: replaced it"
	}
	if pid, err := strconv.Atoi(a["victim_pid"]); err == nil {
		r["signal victim"] = result(syscall.Kill(pid, syscall.SIGCONT), "sent SIGCONT")
	}
	if pid, err := strconv.Atoi(core); err == nil {
		r["signal core"] = result(syscall.Kill(pid, syscall.SIGCONT), "sent SIGCONT")
	}
	f, err := os.OpenFile(a["victim_binary"], os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	r["overwrite a plugin binary"] = result(err, "opened it for writing")
	err = os.WriteFile(filepath.Join(filepath.Dir(a["victim_binary"]), "planted"), []byte("#!/bin/sh\n"), 0o755)
	r["plant a plugin in plugin_dir"] = result(err, "wrote a new plugin")
	// What a plugin may do: write a temporary file.
	err = os.WriteFile(filepath.Join(os.TempDir(), "scratch"), []byte("ok"), 0o600)
	r["own temporary directory"] = result(err, "wrote "+os.TempDir())
	return r
}

func dial(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func callVictim(ctx context.Context, path string) string {
	conn, err := dial(path)
	if err != nil {
		return "denied: " + err.Error()
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := pluginpb.NewPluginServiceClient(conn).Capabilities(ctx, &emptypb.Empty{})
	return result(err, "called Capabilities of "+c.GetName())
}

func victimState(ctx context.Context, path string) string {
	conn, err := dial(path)
	if err != nil {
		return "denied: " + err.Error()
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := pluginpb.NewPluginStateClient(conn).Get(ctx, &pluginpb.StateGetRequest{Key: "secret"})
	return result(err, fmt.Sprintf("read the victim's state: found=%v %q", v.GetFound(), v.GetValue()))
}

func whoami() map[string]string {
	r := map[string]string{"uid": strconv.Itoa(os.Getuid()), "gid": strconv.Itoa(os.Getgid())}
	for name, res := range map[string]int{"as": syscall.RLIMIT_AS, "nofile": syscall.RLIMIT_NOFILE, "nproc": 6, "core": syscall.RLIMIT_CORE} {
		var l syscall.Rlimit
		if err := syscall.Getrlimit(res, &l); err != nil {
			r[name] = err.Error()
			continue
		}
		r[name] = fmt.Sprintf("%d/%d", l.Cur, l.Max)
	}
	nnp, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 39 /* PR_GET_NO_NEW_PRIVS */, 0, 0)
	r["no_new_privs"] = strconv.Itoa(int(nnp))
	if errno != 0 {
		r["no_new_privs"] = errno.Error()
	}
	return r
}

func ownState(ctx context.Context) map[string]string {
	st, err := sdk.OpenState()
	if err != nil {
		return map[string]string{"state": "denied: " + err.Error()}
	}
	defer st.Close()
	if err := st.Set(ctx, "mine", "own value"); err != nil {
		return map[string]string{"state": "denied: " + err.Error()}
	}
	v, _, err := st.Get(ctx, "mine")
	return map[string]string{"state": result(err, v)}
}

func main() {
	name := os.Getenv("OPENTALON_TEST_NAME")
	if name == "" {
		name = "hostile"
	}
	if err := sdk.Serve(hostile{name: name}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

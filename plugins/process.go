package plugins

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/opentalon/opentalon/core"
	pluginpb "github.com/opentalon/opentalon/proto"
)

// Handshake environment variables (see docs/plugins.md).
const (
	EnvPluginSocket = "OPENTALON_PLUGIN_SOCKET"
	EnvStateSocket  = "OPENTALON_STATE_SOCKET"
	// EnvProtocol carries ProtocolVersion so a plugin can refuse a core it
	// does not understand.
	EnvProtocol     = "OPENTALON_PLUGIN_PROTOCOL"
	ProtocolVersion = "1"
	// EnvAPIURL and EnvAPIKey tell a plugin where the core's HTTP API
	// (POST /api/plugins/llm/generate) is and the key it needs.
	EnvAPIURL = "OPENTALON_API_URL"
	EnvAPIKey = "OPENTALON_API_KEY"
)

// inheritedEnv are the only variables of the core's environment a plugin
// inherits: the core's may hold provider keys and tokens.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "GOCOVERDIR"}

// Spec says how to start one plugin binary.
type Spec struct {
	Path string
	Args []string
	// Env adds "KEY=value" entries to the plugin's environment.
	Env []string
}

func (s Spec) String() string { return s.Path }

// LaunchOptions configure Launch.
type LaunchOptions struct {
	// State backs the plugin's PluginState service.
	State StateStore
	// StateLimits bound the plugin's state writes.
	StateLimits StateLimits
	// Env adds "KEY=value" entries for every plugin (API URL and key).
	Env []string
	// StartTimeout bounds start-up through the Capabilities call
	// (default 10s).
	StartTimeout time.Duration
	// StopGrace is how long Close waits after SIGTERM before SIGKILL
	// (default 2s).
	StopGrace time.Duration
	// Claim is called with the declared name and the binary before the
	// state namespace is bound; an error aborts the launch (the name
	// belongs to another binary).
	Claim func(name string, bin Binary) error
	// Isolation confines the plugin process (run_as user, Landlock,
	// no_new_privs, resource limits); nil starts it as the core's user
	// with no_new_privs and the minimal environment only.
	Isolation *Isolation
	// SocketRoot is the directory the plugin's private directory is
	// made in ("" = a new one under the temporary directory).
	SocketRoot string
	// Now is the clock of the state write limit (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Process is one running plugin.
type Process struct {
	Spec Spec
	Cap  Capability
	// Binary is the binary that was started: path and content hash.
	Binary Binary

	cmd      *exec.Cmd
	pgid     int
	conn     *grpc.ClientConn
	client   pluginpb.PluginServiceClient
	state    *stateServer
	stateSrv *grpc.Server
	dir      string // the plugin's private directory
	ownRoot  string // SocketRoot made by Launch, removed by Close
	staged   string // the directory of a private copy of the binary (stageBinary)
	grace    time.Duration
	log      *slog.Logger
	// outLog re-logs the plugin's output; renamed after the handshake.
	outLog atomic.Pointer[slog.Logger]

	done    chan struct{}
	waitErr error
	tail    *lineTail
	// relogged is closed once the plugin's output reached its end (every
	// holder of the pipe exited).
	relogged chan struct{}

	stopped   atomic.Bool // set by the manager's first stop
	apiKey    string      // its own key to the core's API (Credentials)
	closeOnce sync.Once
	closeErr  error
}

// Launch starts the plugin, waits for it to serve PluginService, asks for
// its capabilities and validates them. On error nothing is left running.
//
// The plugin gets a private directory (0700) holding its sockets and its
// TMPDIR, a minimal environment, its own session, and, with an
// Isolation, another user, a Landlock domain and resource limits.
func Launch(ctx context.Context, spec Spec, o LaunchOptions) (p *Process, err error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	base := filepath.Base(spec.Path)
	log := o.Logger.With("plugin", base)
	if err := checkBinary(spec.Path); err != nil {
		return nil, err
	}
	cred := o.Isolation.credential()
	// unreachable: the run_as user cannot reach or run the binary where
	// it is; a binary (not a script, whose interpreter reads files beside
	// it) then runs from a private copy the core makes for it.
	var unreachable error
	if cred != nil {
		if unreachable = checkRunnableBy(spec.Path, cred.Uid, cred.Gid, o.Isolation.user); unreachable != nil && isScript(spec.Path) {
			return nil, unreachable
		}
	}
	bin, err := identify(spec.Path)
	if err != nil {
		return nil, err
	}
	p = &Process{Spec: spec, Binary: bin, grace: o.StopGrace, log: log, done: make(chan struct{}), tail: &lineTail{max: 5}, relogged: make(chan struct{})}
	p.outLog.Store(log)
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	root := o.SocketRoot
	if root == "" {
		if root, err = SocketRoot(cred != nil); err != nil {
			return p, err
		}
		p.ownRoot = root
	}
	if p.dir, err = privateDir(root, cred); err != nil {
		return p, err
	}
	run := spec // what is executed: spec, or its private copy
	if unreachable != nil {
		var sum string
		if p.staged, run.Path, sum, err = stageBinary(root, spec.Path); err != nil {
			return p, fmt.Errorf("%w (a private copy was not made: %w)", unreachable, err)
		}
		if err := checkRunnableBy(run.Path, cred.Uid, cred.Gid, o.Isolation.user); err != nil {
			return p, fmt.Errorf("%w (nor can it run the private copy: %w; set TMPDIR to a directory every user may enter)", unreachable, err)
		}
		// The binding names what runs: the copy's content.
		p.Binary.SHA256 = sum
		log.Info("plugins.tools.run_as cannot enter the plugin's directory or run the file there; it runs from a private copy", "binary", spec.Path, "copy", run.Path)
	}

	// The state service listens before the plugin starts.
	stateSock := filepath.Join(p.dir, "state.sock")
	sl, err := net.Listen("unix", stateSock)
	if err != nil {
		return p, fmt.Errorf("plugin %s: listen on %s: %w", spec.Path, stateSock, err)
	}
	if cred != nil {
		if err := os.Chown(stateSock, int(cred.Uid), int(cred.Gid)); err != nil {
			sl.Close()
			return p, fmt.Errorf("plugin %s: %w", spec.Path, err)
		}
	}
	pl := &peerListener{Listener: sl, log: log}
	p.state = newStateServer(o.State, o.StateLimits, o.Now, log)
	p.stateSrv = newStateGRPC(p.state)

	pluginSock := filepath.Join(p.dir, "plugin.sock")
	env := pluginEnv(o.Env, spec.Env, pluginSock, stateSock)
	if o.Isolation != nil {
		tmp := filepath.Join(p.dir, "tmp")
		env = append(env, "TMPDIR="+tmp, "HOME="+tmp)
		if cred != nil {
			env = append(env, "USER="+o.Isolation.name, "LOGNAME="+o.Isolation.name)
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		sl.Close()
		return p, err
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		sl.Close()
		pr.Close()
		pw.Close()
		return p, err
	}
	newCmd := func() *exec.Cmd {
		cmd := exec.Command(run.Path, run.Args...)
		cmd.Env = env
		cmd.Dir = filepath.Dir(run.Path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, pw, pw
		return cmd
	}
	var rules []landlockRule
	if o.Isolation.landlock() {
		rules = o.Isolation.landlockRules(p.dir, run)
	}
	err = p.start(newCmd, o.Isolation, rules)
	pw.Close()
	devNull.Close()
	if err != nil {
		pr.Close()
		sl.Close()
		hint := "check plugins.tools.plugin_dir / plugins.tools.plugins and that the file is executable"
		if errors.Is(err, syscall.EACCES) && o.Isolation.landlock() {
			hint += "; under Landlock a plugin reaches only its own directory and the system's: add the directories of its interpreter or libraries to plugins.tools.sandbox.read_paths"
		}
		return p, fmt.Errorf("start plugin %s: %w (%s)", spec.Path, err, hint)
	}
	pl.sid = p.pgid
	go p.relog(pr)
	go p.stateSrv.Serve(pl)

	p.conn, err = dialUnix(pluginSock)
	if err != nil {
		return p, fmt.Errorf("plugin %s: %w", spec.Path, err)
	}
	p.client = pluginpb.NewPluginServiceClient(p.conn)

	p.Cap, err = p.handshake(ctx, o.StartTimeout, pluginSock)
	if err != nil {
		return p, err
	}
	if err := p.Cap.Validate(); err != nil {
		// The same binary declares the same again: restarting it
		// cannot help.
		return p, fmt.Errorf("plugin %s: %w (%w: not restarted; fix the plugin and restart the gateway)", spec.Path, err, errRefused)
	}
	if o.Claim != nil {
		if err := o.Claim(p.Cap.Name, p.Binary); err != nil {
			return p, fmt.Errorf("plugin %s: %w", spec.Path, err)
		}
	}
	p.log = o.Logger.With("plugin", p.Cap.Name)
	p.outLog.Store(p.log)
	p.state.bind(p.Cap.Name)
	return p, nil
}

// handshake waits for the socket and calls Capabilities.
func (p *Process) handshake(ctx context.Context, timeout time.Duration, sock string) (Capability, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := 5 * time.Millisecond
	for {
		if _, err := os.Stat(sock); err == nil {
			cctx, ccancel := context.WithTimeout(ctx, time.Second)
			c, err := capabilities(cctx, p.client)
			ccancel()
			if err == nil {
				return c, nil
			}
		}
		select {
		case <-p.done:
			// The exit may be seen before its last words were read from
			// the pipe: wait for them (bounded: a child of the plugin may
			// keep the pipe open).
			select {
			case <-p.relogged:
			case <-time.After(2 * time.Second):
			}
			return Capability{}, fmt.Errorf("plugin %s exited during start-up (%v) before serving %s; last output: %s", p.Spec.Path, p.waitErr, EnvPluginSocket, p.tail.String())
		case <-ctx.Done():
			return Capability{}, fmt.Errorf("plugin %s did not answer Capabilities on %s within %s: it must serve PluginService on the unix socket named by %s (docs/plugins.md)", p.Spec.Path, sock, timeout, EnvPluginSocket)
		case <-time.After(wait):
		}
		wait = min(wait*2, 200*time.Millisecond)
	}
}

// Executor returns the executor that calls this process.
func (p *Process) Executor() Executor {
	return &rpcExecutor{client: p.client, name: p.Cap.Name}
}

// Conn is the connection to the plugin's socket, on which it serves
// PluginService and the extension services it declared.
func (p *Process) Conn() grpc.ClientConnInterface { return p.conn }

// Ping is the health check: a Capabilities call.
func (p *Process) Ping(ctx context.Context) error {
	select {
	case <-p.done:
		return fmt.Errorf("plugin %s has exited: %v", p.Cap.Name, p.waitErr)
	default:
	}
	_, err := capabilities(ctx, p.client)
	return err
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr is the exit status once Done is closed.
func (p *Process) ExitErr() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
		return nil
	}
}

// Close stops the plugin's whole process group (SIGTERM, then SIGKILL
// after the grace period), its state service and its directory. It is
// safe to call more than once and on a partly started process.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		if p.conn != nil {
			p.conn.Close()
		}
		if p.cmd != nil {
			_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(p.grace):
			}
			// Kill whatever is left of the group, and of the session for
			// children that moved to a process group of their own.
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
			<-p.done
			killSession(p.pgid)
		}
		if p.stateSrv != nil {
			p.stateSrv.Stop()
		}
		if p.dir != "" {
			p.closeErr = os.RemoveAll(p.dir)
		}
		if p.staged != "" {
			if err := os.RemoveAll(p.staged); p.closeErr == nil {
				p.closeErr = err
			}
		}
		if p.ownRoot != "" {
			if err := os.RemoveAll(p.ownRoot); p.closeErr == nil {
				p.closeErr = err
			}
		}
	})
	return p.closeErr
}

func (p *Process) relog(r *os.File) {
	defer close(p.relogged)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.tail.add(line)
		p.outLog.Load().Info("plugin output", "line", line)
	}
}

func pluginEnv(common, own []string, pluginSock, stateSock string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, common...)
	env = append(env, own...)
	// Last, so nothing above can point the plugin elsewhere.
	return append(env, EnvPluginSocket+"="+pluginSock, EnvStateSocket+"="+stateSock, EnvProtocol+"="+ProtocolVersion)
}

// SocketRoot makes the directory the plugins' private directories are
// made in, short enough for unix socket paths and owned by the core:
// 0700, or 0711 when plugins run as another user (they may pass through
// it to their own directory but not list it).
func SocketRoot(otherUser bool) (string, error) {
	dir, err := os.MkdirTemp(tempSocketParent(), socketRootPrefix)
	if err != nil {
		return "", fmt.Errorf("create the plugin socket directory: %w", err)
	}
	mode := os.FileMode(0o700)
	if otherUser {
		mode = 0o711
	}
	return dir, os.Chmod(dir, mode)
}

// stageBinary copies the plugin binary at path into a new directory in
// root, for a run_as user who cannot reach the original (a plugin under
// /root, or in a 0700 directory). The directory (0711) and the copy
// (0711: run, not read) are the core's alone. Only a file the core's user
// owns, in a directory it owns, reached without a symlink, is copied: the
// copy must not let another user run, as run_as, a file of the core's
// they could only point at. The file is read once, through one
// descriptor that follows no link, and hashed as it is copied. It returns
// the directory, the copy's path and its SHA-256.
func stageBinary(root, path string) (dir, copyPath, sum string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err != nil || real != abs {
		return "", "", "", fmt.Errorf("its path goes through a symbolic link")
	}
	me := uint32(os.Geteuid())
	if st, ok := ownerOf(filepath.Dir(abs)); !ok || st != me {
		return "", "", "", fmt.Errorf("its directory is not owned by the core's user (uid %d)", me)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(root, &fs); err == nil && fs.Flags&stNoExec != 0 {
		return "", "", "", fmt.Errorf("the temporary directory %s is mounted noexec; set TMPDIR to a directory where programs may run", filepath.Dir(root))
	}
	src, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", "", "", err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return "", "", "", err
	}
	if st, _ := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || st == nil || st.Uid != me {
		return "", "", "", fmt.Errorf("it is not a regular file owned by the core's user (uid %d)", me)
	}
	if dir, err = os.MkdirTemp(root, "bin-"); err != nil {
		return "", "", "", err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
			dir = ""
		}
	}()
	if err = os.Chmod(dir, 0o711); err != nil {
		return dir, "", "", err
	}
	copyPath = filepath.Join(dir, filepath.Base(abs))
	h := sha256.New()
	// A child forked meanwhile (another plugin starting) would inherit the
	// write descriptor and make the exec fail with ETXTBSY.
	syscall.ForkLock.RLock()
	err = func() error {
		dst, err := os.OpenFile(copyPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o700)
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.MultiWriter(dst, h), src); err != nil {
			dst.Close()
			return err
		}
		return dst.Close()
	}()
	syscall.ForkLock.RUnlock()
	if err != nil {
		return dir, "", "", err
	}
	return dir, copyPath, hex.EncodeToString(h.Sum(nil)), os.Chmod(copyPath, 0o711)
}

// stNoExec is statfs's ST_NOEXEC flag.
const stNoExec = 0x8

// ownerOf is the uid that owns path.
func ownerOf(path string) (uint32, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// tempFallbacks are the directories tried, in order, when $TMPDIR is not
// a usable parent for socket roots (as Python's tempfile.gettempdir
// tries /tmp and /var/tmp): a TMPDIR that names a directory that does
// not exist, or one too long for socket paths.
var tempFallbacks = []string{"/tmp", "/var/tmp"}

// tempSocketParent is the temporary directory socket roots are made in
// when not in the data directory: $TMPDIR when it is a directory short
// enough for socket paths, else the first of tempFallbacks that is; when
// none is, $TMPDIR (or the first fallback when $TMPDIR is too long),
// whose error then names it.
func tempSocketParent() string {
	tmp := os.TempDir()
	for _, dir := range append([]string{tmp}, tempFallbacks...) {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() && len(dir) <= maxSocketParent {
			return dir
		}
	}
	if len(tmp) > maxSocketParent && len(tempFallbacks) > 0 {
		return tempFallbacks[0]
	}
	return tmp
}

// privateDir makes one plugin's directory in root (0700) with a tmp
// directory in it. When the plugin runs as another user both belong to
// that user, who must create its socket there; the unlistable root and
// the random name keep other plugins from finding it, and Landlock from
// touching it.
func privateDir(root string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp(root, "p-")
	if err != nil {
		return "", fmt.Errorf("create a plugin directory: %w", err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return dir, fmt.Errorf("create a plugin directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return dir, err
	}
	if cred != nil {
		for _, d := range []string{dir, tmp} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return dir, fmt.Errorf("give plugin directory %s to uid %d: %w", d, cred.Uid, err)
			}
		}
	}
	return dir, nil
}

// lineTail keeps the last lines of a plugin's output for error messages.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *lineTail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	t.lines = append(t.lines, s)
	if len(t.lines) > t.max {
		t.lines = t.lines[1:]
	}
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return "(none)"
	}
	return strings.Join(t.lines, " | ")
}

// noState refuses state calls when no store is configured.
type noState struct{}

var errNoState = errors.New("no plugin state store configured")

func (noState) PluginStateGet(context.Context, string, string) (string, bool, error) {
	return "", false, errNoState
}
func (noState) PluginStatePut(context.Context, string, string, string, core.PluginStateQuota) error {
	return errNoState
}
func (noState) PluginStateDelete(context.Context, string, string) error { return errNoState }
func (noState) PluginStateKeys(context.Context, string, string) ([]string, error) {
	return nil, errNoState
}

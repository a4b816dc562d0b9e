package main

// The Dockerfile's contract (issue 26, items 2 and 3). Its final stage
// cannot be built here (no Docker daemon, no base images), so the test
// reads the real Dockerfile and lays out in a directory the filesystem its
// final stage produces — the static binary, /data as the build stage
// creates it and COPY --chown gives it, no /tmp — then runs the binary
// there with the image's USER, ENV and ENTRYPOINT, a plugin, the README's
// docker run variables, `doctor`, the HEALTHCHECK and a backup. As root
// the process is chrooted into that directory as the image's user;
// otherwise the same layout is used through the image's variables with
// TMPDIR pointing nowhere.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// dockerImage is what the Dockerfile's final stage says.
type dockerImage struct {
	copies     [][2]string // COPY --from=build: build-stage path → image path
	chown      map[string][2]int
	user       [2]int
	env        map[string]string
	entrypoint []string
	cmd        []string
	health     []string
	// dataMode is the mode the build stage creates /out/data with.
	dataMode os.FileMode
}

func readDockerfile(t *testing.T) dockerImage {
	t.Helper()
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Instructions with their continuation lines joined.
	var ins []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" && cur.Len() == 0 {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(line)
		ins = append(ins, cur.String())
		cur.Reset()
	}
	img := dockerImage{chown: map[string][2]int{}, env: map[string]string{}}
	final := false
	jsonArray := func(s string) []string {
		var out []string
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			t.Fatalf("Dockerfile: %q is not a JSON array: %v", s, err)
		}
		return out
	}
	ids := func(s string) [2]int {
		u, g, _ := strings.Cut(s, ":")
		a, err1 := strconv.Atoi(u)
		b, err2 := strconv.Atoi(g)
		if err1 != nil || err2 != nil {
			t.Fatalf("Dockerfile: %q is not uid:gid", s)
		}
		return [2]int{a, b}
	}
	modeRe := regexp.MustCompile(`-m\s*(0?[0-7]{3})\s+(?:\S+\s+)*?/out/data\b`)
	for _, in := range ins {
		word, rest, _ := strings.Cut(in, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(word) {
		case "FROM":
			final = strings.HasPrefix(rest, "scratch")
		case "RUN":
			if m := modeRe.FindStringSubmatch(rest); m != nil {
				n, _ := strconv.ParseUint(m[1], 8, 32)
				img.dataMode = os.FileMode(n)
			}
		}
		if !final {
			continue
		}
		switch strings.ToUpper(word) {
		case "COPY":
			f := strings.Fields(rest)
			var chown string
			var paths []string
			for _, x := range f {
				switch {
				case strings.HasPrefix(x, "--chown="):
					chown = strings.TrimPrefix(x, "--chown=")
				case strings.HasPrefix(x, "--"):
				default:
					paths = append(paths, x)
				}
			}
			img.copies = append(img.copies, [2]string{paths[0], paths[1]})
			if chown != "" {
				img.chown[paths[1]] = ids(chown)
			}
		case "USER":
			img.user = ids(rest)
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				img.env[k] = v
			}
		case "ENTRYPOINT":
			img.entrypoint = jsonArray(rest)
		case "CMD":
			img.cmd = jsonArray(rest)
		case "HEALTHCHECK":
			_, c, _ := strings.Cut(rest, "CMD ")
			img.health = jsonArray(c)
		}
	}
	if img.dataMode == 0 {
		t.Fatal("Dockerfile: the build stage does not create /out/data with an explicit mode (-m 0700)")
	}
	return img
}

// imageRoot is the image's filesystem laid out in a directory.
type imageRoot struct {
	t      *testing.T
	img    dockerImage
	dir    string
	chroot bool
	env    []string
}

// path is where an image path lies on this machine.
func (r *imageRoot) path(p string) string { return filepath.Join(r.dir, p) }

// inside maps an image path to what the process is given: itself under
// chroot, else its place on this machine.
func (r *imageRoot) inside(p string) string {
	if r.chroot {
		return p
	}
	return r.path(p)
}

// command runs the image's ENTRYPOINT with args, as docker run and
// docker exec do.
func (r *imageRoot) command(args ...string) *exec.Cmd {
	argv := append(append([]string(nil), r.img.entrypoint...), args...)
	cmd := exec.Command(r.path(argv[0]), argv[1:]...)
	cmd.Env = r.env
	if r.chroot {
		cmd.Path = argv[0]
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: r.dir,
			Credential: &syscall.Credential{Uid: uint32(r.img.user[0]), Gid: uint32(r.img.user[1])}}
		cmd.Dir = "/"
	}
	return cmd
}

func layOutImage(t *testing.T, img dockerImage, plugin string) *imageRoot {
	t.Helper()
	r := &imageRoot{t: t, img: img, dir: t.TempDir(), chroot: os.Geteuid() == 0}
	if err := os.Chmod(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The build stage's RUN: a static binary, as the Dockerfile builds it.
	bin := filepath.Join(t.TempDir(), "opentalon")
	build := exec.Command("go", "build", "-trimpath", "-tags", releaseTags, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build (as the Dockerfile does): %v\n%s", err, out)
	}
	for _, c := range img.copies {
		src, dst := c[0], r.path(c[1])
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		switch src {
		case "/out/opentalon":
			copyExecutable(t, bin, dst)
		case "/out/data":
			if err := os.Mkdir(dst, img.dataMode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dst, img.dataMode); err != nil { // past the umask
				t.Fatal(err)
			}
		default: // CA certificates: the host's, when it has them
			b, _ := os.ReadFile(src)
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if own, ok := img.chown[c[1]]; ok && r.chroot {
			if err := os.Chown(dst, own[0], own[1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What the container runtime adds to every image: the device files of
	// /dev (under chroot; otherwise the host's /dev is there).
	if r.chroot {
		if err := os.Mkdir(r.path("/dev"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range []struct {
			name         string
			major, minor uint32
		}{{"null", 1, 3}, {"zero", 1, 5}, {"random", 1, 8}, {"urandom", 1, 9}} {
			if err := syscall.Mknod(r.path("/dev/"+d.name), syscall.S_IFCHR|0o666, int(d.major<<8|d.minor)); err != nil {
				t.Fatalf("mknod /dev/%s: %v", d.name, err)
			}
			os.Chmod(r.path("/dev/"+d.name), 0o666)
		}
	}
	// What docker run adds: the plugin (a static build) and the config,
	// both read-only mounts owned by root.
	if err := os.MkdirAll(r.path("/plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyExecutable(t, plugin, r.path("/plugins/calc"))
	if _, err := os.Stat(r.path("/tmp")); err == nil {
		t.Fatal("the image has a /tmp")
	}
	env := map[string]string{}
	for k, v := range img.env {
		env[k] = v
		if !r.chroot && strings.HasPrefix(v, "/") {
			env[k] = r.path(v)
		}
	}
	if !r.chroot {
		env["TMPDIR"] = r.path("/tmp") // the image has none
	}
	r.env = nil
	for k, v := range env {
		r.env = append(r.env, k+"="+v)
	}
	return r
}

func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// freeLoopbackPort returns a port nothing listens on right now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestDockerImageContract(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts processes")
	}
	img := readDockerfile(t)
	if img.dataMode != 0o700 {
		t.Errorf("the Dockerfile creates /data with mode %04o; want 0700 (doctor fails a data directory others can enter)", img.dataMode)
	}
	if img.env["OPENTALON_DATA_DIR"] != "/data" || img.user[0] == 0 {
		t.Fatalf("image env %v, user %v; want OPENTALON_DATA_DIR=/data and a non-root user", img.env, img.user)
	}
	// A static plugin: the image has no libc.
	pluginBin := filepath.Join(t.TempDir(), "calc")
	pb := exec.Command("go", "build", "-o", pluginBin, ".")
	pb.Dir = "../../plugins/examples/calc"
	pb.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := pb.CombinedOutput(); err != nil {
		t.Fatalf("build the calc plugin: %v\n%s", err, out)
	}
	r := layOutImage(t, img, pluginBin)
	t.Logf("image root %s (chroot: %v)", r.dir, r.chroot)

	llm := providertest.NewOpenAI(t)
	llm.SetReply(toolLLM)
	bot := telegramtest.New(t, tgToken)
	// The README's config for the image: a chat platform on, the data
	// directory and the listen address left to the image's variables.
	cfg := fmt.Sprintf(`models:
  providers:
    fake: { api: openai-completions, base_url: %q, api_key: "${LLM_API_KEY}" }
  catalog:
    fake/small: { alias: small, weight: 80 }
routing: { primary: fake/small }
channels:
  console: { enabled: false }
  telegram: { enabled: true, token: "${TELEGRAM_BOT_TOKEN}", api_url: %q, allow_users: ["42"] }
plugins:
  tools: { plugin_dir: /plugins }
`, llm.BaseURL(), bot.URL)
	if !r.chroot {
		cfg = strings.Replace(cfg, "/plugins", r.path("/plugins"), 1)
	}
	if err := os.MkdirAll(r.path("/etc/opentalon"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.path("/etc/opentalon/config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// docker run -e …; -p 127.0.0.1:7070:7070 maps the image's 0.0.0.0
	// listener: here it listens on a free loopback port instead.
	port := freeLoopbackPort(t)
	r.env = append(r.env, "OPENTALON_CONFIG="+r.inside("/etc/opentalon/config.yaml"), "OPENTALON_API_KEY=server-key",
		"TELEGRAM_BOT_TOKEN="+tgToken, "LLM_API_KEY=llm-key", fmt.Sprintf("OPENTALON_LISTEN=127.0.0.1:%d", port))

	gw := r.command(img.cmd...)
	var stderr lockedBuf
	gw.Stderr = &stderr
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	var exited sync.WaitGroup
	exited.Add(1)
	var waitErr error
	go func() { waitErr = gw.Wait(); exited.Done() }()
	done := make(chan struct{})
	go func() { exited.Wait(); close(done) }()
	t.Cleanup(func() { gw.Process.Kill(); <-done })

	bot.AddUpdate(bot.Private(telegramtest.User(42, "alice"), "please compute six times seven"))
	deadline := time.Now().Add(60 * time.Second)
	for len(bot.Sent()) == 0 {
		select {
		case <-done:
			t.Fatalf("the gateway exited (%v) before answering; stderr:\n%s", waitErr, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer within 60s; stderr:\n%s", stderr.String())
		}
	}
	if got := bot.Sent()[0].Text; !strings.Contains(got, "42") {
		t.Fatalf("answer %q; want the calc plugin's 42; stderr:\n%s", got, stderr.String())
	}
	if strings.Contains(stderr.String(), "plugin failed to start") {
		t.Fatalf("a plugin failed to start:\n%s", stderr.String())
	}
	checkPrivate := func(p string, mode os.FileMode) {
		t.Helper()
		fi, err := os.Stat(r.path(p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s has mode %04o; want %04o", p, fi.Mode().Perm(), mode)
		}
		if st := fi.Sys().(*syscall.Stat_t); r.chroot && int(st.Uid) != img.user[0] {
			t.Errorf("%s belongs to uid %d; want the image's user %d", p, st.Uid, img.user[0])
		}
	}
	checkPrivate("/data", 0o700)
	checkPrivate("/data/opentalon.db", 0o600)
	roots, _ := filepath.Glob(r.path("/data/otp-*"))
	if len(roots) != 1 {
		t.Errorf("plugin socket roots in /data: %v; want one", roots)
	}

	// docker exec opentalon /opentalon doctor | healthcheck | backup.
	run := func(args ...string) (int, string) {
		c := r.command(args...)
		out, _ := c.CombinedOutput()
		return c.ProcessState.ExitCode(), string(out)
	}
	if code, out := run("doctor"); code != 0 || !regexp.MustCompile(`(?m)^ok\s+data dir: .*mode 0700`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^ok\s+database: `).MatchString(out) {
		t.Errorf("doctor in the image: exit %d\n%s", code, out)
	}
	if !slices.Equal(img.health, append(append([]string(nil), img.entrypoint...), "healthcheck")) {
		t.Errorf("HEALTHCHECK runs %v; want the entrypoint's healthcheck", img.health)
	}
	if code, out := run(img.health[1:]...); code != 0 || !strings.Contains(out, "healthy") {
		t.Errorf("the image's HEALTHCHECK: exit %d %s", code, out)
	}
	if code, out := run("backup", r.inside("/data/backup.db")); code != 0 {
		t.Errorf("backup in the image: exit %d %s", code, out)
	} else {
		checkPrivate("/data/backup.db", 0o600)
	}

	// docker stop: SIGTERM, answers in flight finish, the sockets go.
	gw.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		t.Fatal("the gateway did not stop within 45s of SIGTERM")
	}
	if waitErr != nil {
		t.Errorf("after SIGTERM: %v; stderr:\n%s", waitErr, stderr.String())
	}
	if roots, _ := filepath.Glob(r.path("/data/otp-*")); len(roots) != 0 {
		t.Errorf("plugin socket roots left in /data after a clean stop: %v", roots)
	}
}

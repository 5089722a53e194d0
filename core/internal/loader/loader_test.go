package loader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/pluginapi/base"
)

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	exe := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe("sched-ws")
	exe("driver-cpu")
	exe("iface-csr")
	exe("driver-cuda-12")
	exe("foo-bar") // unknown kind
	exe("driver-") // no name
	exe("sched")   // no name
	exe("README")  // not a plugin name
	if err := os.WriteFile(filepath.Join(dir, "driver-noexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sched-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "iface-csr"), filepath.Join(dir, "iface-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "iface-dangling")); err != nil {
		t.Fatal(err)
	}
	got, err := Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := func(kind base.Kind, name string) Candidate {
		return Candidate{Path: filepath.Join(dir, string(kind)+"-"+name), Kind: kind, Name: name}
	}
	want := []Candidate{
		c(base.KindDriver, "cpu"), c(base.KindDriver, "cuda-12"),
		c(base.KindScheduler, "ws"),
		c(base.KindInterface, "csr"), c(base.KindInterface, "link"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Discover:\n got %+v\nwant %+v", got, want)
	}
	if l := want[1].Label(); l != "driver-cuda-12" {
		t.Fatalf("Label %q", l)
	}
}

func TestDiscoverMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no-such-plugins")
	_, err := Discover(dir)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("error %v, want one naming %s as missing", err, dir)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Discover(file); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("error %v, want one naming %s", err, file)
	}
}

// launchErr launches c and checks that it fails with an error naming the
// plugin and its path and containing every one of wants.
func launchErr(t *testing.T, c Candidate, timeout time.Duration, wants ...string) error {
	t.Helper()
	log, _ := testLogger(t)
	_, err := Launch(context.Background(), c, Options{Arena: newArena(t), Logger: log, StartTimeout: timeout})
	if err == nil {
		t.Fatal("Launch succeeded")
	}
	prefix := "plugin " + c.Label() + " (" + c.Path + "): "
	if !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("error %q does not start with %q", err, prefix)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
	t.Logf("error: %v", err)
	return err
}

func script(t *testing.T, name, body string) Candidate {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	kind, n, _ := ParseName(name)
	return Candidate{Path: path, Kind: kind, Name: n}
}

func TestLaunchBinaryMissing(t *testing.T) {
	c := Candidate{Path: filepath.Join(t.TempDir(), "driver-gone"), Kind: base.KindDriver, Name: "gone"}
	launchErr(t, c, 0, "binary missing")
}

func TestLaunchNotExecutable(t *testing.T) {
	c := script(t, "driver-noexec", "exit 0")
	os.Chmod(c.Path, 0o644)
	launchErr(t, c, 0, "not executable (mode -rw-r--r--)")
}

func TestLaunchNotAPluginGarbage(t *testing.T) {
	c := script(t, "driver-garbage", `echo "hello, I am not a plugin"; exit 0`)
	launchErr(t, c, 10*time.Second,
		`handshake refused, not a starpu plugin: it printed "hello, I am not a plugin" where the go-plugin handshake was expected`)
}

func TestLaunchIgnoresHandshake(t *testing.T) {
	// sleep is a child of the shell holding its pipes: it is killed with
	// the plugin's process group (TestLaunchScriptWithChildren).
	c := script(t, "sched-silent", `echo "some log line" >&2; sleep 60`)
	start := time.Now()
	launchErr(t, c, time.Second, "not a starpu plugin: no go-plugin handshake within 1s", "some log line")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Launch took %s", d)
	}
}

func TestLaunchCrashAtStart(t *testing.T) {
	launchErr(t, candidate(t, "driver-fake", "driver-crash"), 0,
		"exited during start with exit status 3", "driver-crash: crashing on purpose")
}

func TestLaunchFactoryFails(t *testing.T) {
	launchErr(t, candidate(t, "driver-fake", "driver-badfactory"), 0,
		"exited during start with exit status 1",
		"[ERROR] plugin failed to start: error=no device found kind=driver")
}

func TestLaunchWrongKind(t *testing.T) {
	// A driver binary installed under a scheduler's name.
	launchErr(t, candidate(t, "driver-fake", "sched-fake"), 0,
		`wrong kind: it is a "driver" plugin named "fake", not a "sched" plugin`)
}

func TestLaunchWrongName(t *testing.T) {
	c := candidate(t, "iface-fake", "")
	c.Name = "csr"
	launchErr(t, c, 0, "wrong name: it says it is iface-fake")
}

func TestLaunchOptions(t *testing.T) {
	c := candidate(t, "driver-fake", "")
	if _, err := Launch(context.Background(), c, Options{}); err == nil || !strings.Contains(err.Error(), "no shared-memory arena") {
		t.Fatalf("Launch without arena: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Launch(ctx, c, Options{Arena: newArena(t)}); !errors.Is(err, context.Canceled) && (err == nil || !strings.Contains(err.Error(), "context canceled")) {
		t.Fatalf("Launch with a cancelled context: %v", err)
	}
	bad := c
	bad.Kind = "codec"
	if _, err := Launch(context.Background(), bad, Options{Arena: newArena(t)}); err == nil || !strings.Contains(err.Error(), `unknown plugin kind "codec"`) {
		t.Fatalf("Launch of an unknown kind: %v", err)
	}
}

func TestPluginAccessorsAndLogs(t *testing.T) {
	t.Setenv("OPENBLAS_NUM_THREADS", "8")
	p, _, logs := launch(t, candidate(t, "driver-fake", ""))
	if p.Info == nil || p.Info.Kind != base.KindDriver || p.Info.Name != "fake" {
		t.Fatalf("Info %+v", p.Info)
	}
	if p.Pid() <= 0 || p.Exited() {
		t.Fatalf("pid %d exited %v", p.Pid(), p.Exited())
	}
	d, err := p.Driver()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Scheduler(); err == nil || !strings.Contains(err.Error(), "plugin driver-fake is a driver plugin, not a scheduler") {
		t.Fatalf("Scheduler() of a driver: %v", err)
	}
	if _, err := p.Interface(); err == nil {
		t.Fatal("Interface() of a driver succeeded")
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	var blas []string
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.HasPrefix(kv, []byte("OPENBLAS_NUM_THREADS=")) {
			blas = append(blas, string(kv))
		}
	}
	if !reflect.DeepEqual(blas, []string{"OPENBLAS_NUM_THREADS=1"}) {
		t.Fatalf("plugin environment has %v", blas)
	}
	if l := logs.String(); !strings.Contains(l, "[INFO]  core.driver-fake: fake driver started:") || !strings.Contains(l, "name=fake") {
		t.Fatalf("the plugin's log line is not in the core's log:\n%s", logs.String())
	}
	p.Kill()
	if !p.Exited() {
		t.Fatal("not exited after Kill")
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Kill")
	}
	if strings.Contains(logs.String(), "plugin failed to exit gracefully") {
		t.Fatalf("Kill was not graceful:\n%s", logs.String())
	}
	if _, err := d.Fingerprint(context.Background()); !errors.Is(err, base.ErrPluginExited) || !strings.HasPrefix(err.Error(), "plugin driver-fake: ") {
		t.Fatalf("call after Kill: %v, want plugin driver-fake: ... wrapping base.ErrPluginExited", err)
	}
	p.Kill() // again: a no-op
}

func TestExitedAfterSIGKILL(t *testing.T) {
	p, _, _ := launch(t, candidate(t, "sched-fake", ""))
	s, err := p.Scheduler()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5s after SIGKILL")
	}
	if !p.Exited() {
		t.Fatal("Exited() false after the process was killed")
	}
	err = s.Deinit(context.Background())
	if !errors.Is(err, base.ErrPluginExited) || !strings.HasPrefix(err.Error(), "plugin sched-fake: ") {
		t.Fatalf("call to a dead plugin: %v, want plugin sched-fake: ... wrapping base.ErrPluginExited", err)
	}
}

func TestLaunchConcurrent(t *testing.T) {
	a := newArena(t)
	log, _ := testLogger(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := candidate(t, []string{"driver-fake", "sched-fake", "iface-fake"}[i%3], "")
			p, err := Launch(context.Background(), c, Options{Arena: a, Logger: log})
			if err != nil {
				errs[i] = err
				return
			}
			defer p.Kill()
			if _, err := p.raw.(base.Plugin).PluginInfo(context.Background()); err != nil {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestRunByHand(t *testing.T) {
	path := filepath.Join(binDir, "driver-fake")
	run := func(env ...string) (int, string) {
		cmd := exec.Command(path)
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("run by hand: %v", err)
		}
		return ee.ExitCode(), out.String()
	}
	code, out := run()
	if code != 1 || !strings.Contains(out, base.NotStartedByRuntime) || !strings.Contains(out, "This binary is a plugin") {
		t.Fatalf("without the cookie: exit %d, output:\n%s", code, out)
	}
	code, out = run(base.Handshake.MagicCookieKey + "=" + base.Handshake.MagicCookieValue)
	if code != 1 || !strings.Contains(out, base.NotStartedByRuntime+" (no shared-memory arena on file descriptor 3)") {
		t.Fatalf("without the arena: exit %d, output:\n%s", code, out)
	}
}

// waitGone waits up to 5 seconds for pid to end.
func waitGone(t *testing.T, pid int, why string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("plugin process %d still there 5s after %s", pid, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The core (here a helper process that Launches a plugin) is SIGKILLed: the
// plugin must go too.
func TestPluginDiesWithCore(t *testing.T) {
	for _, file := range []string{"driver-fake", "sched-fake", "iface-fake"} {
		t.Run(file, func(t *testing.T) {
			helper, pid := startHelper(t, "launch", filepath.Join(binDir, file))
			if processGone(pid) {
				t.Fatal("plugin not running")
			}
			helper.Process.Kill()
			helper.Wait()
			start := time.Now()
			waitGone(t, pid, "the core was killed")
			t.Logf("plugin gone %s after the core", time.Since(start).Round(time.Millisecond))
			// The dead core's socket directory is removed by the next
			// core's first Launch.
			stale := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-*", sockDirPrefix, helper.Process.Pid))
			if m, _ := filepath.Glob(stale); len(m) != 1 {
				t.Fatalf("socket directories of the killed core: %v, want one", m)
			}
			sweepStaleSockDirs(hclog.NewNullLogger())
			if m, _ := filepath.Glob(stale); len(m) != 0 {
				t.Fatalf("socket directories of the killed core left after the sweep: %v", m)
			}
		})
	}
}

// The same without Pdeathsig: the plugin's own parent watchdog ends it.
func TestPluginWatchdog(t *testing.T) {
	helper, pid := startHelper(t, "raw", filepath.Join(binDir, "driver-fake"))
	if processGone(pid) {
		t.Fatal("plugin not running")
	}
	helper.Process.Kill()
	helper.Wait()
	start := time.Now()
	waitGone(t, pid, "its parent was killed (watchdog)")
	t.Logf("plugin gone %s after its parent", time.Since(start).Round(time.Millisecond))
}

// A plugin built against another plugin API version is refused at the
// handshake with an error that says so and what to do.
func TestLaunchOtherAPIVersion(t *testing.T) {
	a := newArena(t)
	c := Candidate{Path: filepath.Join(binDir, "sched-oldapi"), Kind: base.KindScheduler, Name: "oldapi"}
	p, err := Launch(context.Background(), c, Options{Arena: a})
	if err == nil {
		p.Kill()
		t.Fatal("Launch accepted a plugin of another API version")
	}
	for _, want := range []string{"sched-oldapi", "another plugin API version", fmt.Sprintf("Plugin version: %d", base.APIVersion+1), "rebuild it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// DiscoverPath takes the first plugin of each name along the path, skips
// directories that are absent or refused, and says what each one gave.
func TestDiscoverPath(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string, mode os.FileMode, plugins ...string) string {
		d := filepath.Join(root, dir)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range plugins {
			if err := os.WriteFile(filepath.Join(d, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := mk("first", 0o755, "sched-ws")
	unsafe := mk("unsafe", 0o775, "sched-evil")
	second := mk("second", 0o755, "sched-ws", "driver-cpu")
	missing := filepath.Join(root, "missing")
	cs, search := DiscoverPath([]string{first, missing, unsafe, second})
	var got []string
	for _, c := range cs {
		got = append(got, c.Path)
	}
	want := []string{filepath.Join(second, "driver-cpu"), filepath.Join(first, "sched-ws")}
	if !slices.Equal(got, want) {
		t.Fatalf("candidates %q, want %q", got, want)
	}
	s := search.String()
	for _, w := range []string{first + " (1 plugins)", missing + " (does not exist)", unsafe + " (refused: ", second + " (2 plugins)"} {
		if !strings.Contains(s, w) {
			t.Errorf("search %q lacks %q", s, w)
		}
	}
}

// A handshake naming a TCP address, or a socket outside the directory the
// loader gave the plugin, is refused before go-plugin dials it: the core
// never connects where a plugin's line says.
func TestLaunchHandshakeAddressRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			dialed <- struct{}{}
		}
	}()
	for _, c := range []struct {
		name, line, want string
	}{
		{"tcp", fmt.Sprintf("1|%d|tcp|%s|grpc", base.APIVersion, ln.Addr()), "handshake refused: its handshake names a tcp address (" + ln.Addr().String() + ")"},
		{"socket elsewhere", fmt.Sprintf("1|%d|unix|/tmp/elsewhere.sock|grpc", base.APIVersion), "handshake refused: its handshake names the socket /tmp/elsewhere.sock, outside the directory"},
		{"socket climbing out", fmt.Sprintf("1|%d|unix|${PLUGIN_UNIX_SOCKET_DIR}/../../x.sock|grpc", base.APIVersion), "outside the directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			launchErr(t, script(t, "driver-dialer", `echo "`+c.line+`"; sleep 60`), 10*time.Second, c.want)
		})
	}
	select {
	case <-dialed:
		t.Fatal("the core dialed the TCP address a plugin's handshake named")
	default:
	}
}

func TestBadHandshake(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"1|2|unix|/s/dir/plugin-dir1/plugin2|grpc|CERT", ""},
		{"hello, I am not a plugin", ""},
		{"1|2|tcp|127.0.0.1:1234|grpc", "tcp address"},
		{"1|2|unix|/s/dirx/p|grpc", "outside"},
		{"1|2|unix|relative/p|grpc", "outside"},
	} {
		got := badHandshake(c.line, "/s/dir")
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("badHandshake(%q) = %q, want %q", c.line, got, c.want)
		}
	}
}

// A chatty process's lines before its handshake are dropped, up to
// maxChatter; another process's first line goes to go-plugin as it came.
func TestHandshakeGuardChatter(t *testing.T) {
	const hs = "1|2|unix|/s/dir/p|grpc|\n"
	long := strings.Repeat("x", 1000) + "\n"
	for _, c := range []struct {
		name   string
		out    string
		chatty bool
		want   string // the first line go-plugin reads
	}{
		{"quiet", hs, true, hs},
		{"go test -v", "=== RUN   TestKernels\nhello before Init\n" + hs + "after\n", true, hs},
		{"not chatty", "=== RUN   TestKernels\n" + hs, false, "=== RUN   TestKernels\n"},
		{"too chatty", strings.Repeat(long, maxChatter/len(long)+1) + hs, true, long},
		{"bad handshake after chatter", "hello\n1|2|tcp|127.0.0.1:1|grpc\n", true, "refused: its handshake names a tcp address (127.0.0.1:1): a plugin listens on a unix socket in the directory the core gives it\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var refused atomic.Pointer[string]
			g := &handshakeGuard{r: io.NopCloser(strings.NewReader(c.out)), dir: "/s/dir", refused: &refused, chatty: c.chatty, logger: hclog.NewNullLogger()}
			all, err := io.ReadAll(g)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(all), "\n")
			if first+"\n" != c.want {
				t.Fatalf("first line %.80q, want %.80q", first, c.want)
			}
		})
	}
}

// RemoveOwnSockDirs removes this process's socket directories, not
// another's.
func TestRemoveOwnSockDirs(t *testing.T) {
	mine, err := newSockDir()
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", sockDirPrefix, os.Getpid()+1))
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(other)
	RemoveOwnSockDirs()
	if _, err := os.Stat(mine); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("own socket directory %s: %v, want it gone", mine, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another process's socket directory: %v, want it kept", err)
	}
}

// A plugin the loader kills for a handshake go-plugin refused is said to
// be killed by the loader, not to have "died during start (signal:
// killed)".
func TestLaunchKilledForHandshake(t *testing.T) {
	c := script(t, "driver-oldcore", `echo "9|1|unix|${PLUGIN_UNIX_SOCKET_DIR}/x.sock|grpc"; sleep 60`)
	err := launchErr(t, c, 10*time.Second, "the loader killed it")
	if strings.Contains(err.Error(), "died during start") {
		t.Fatalf("error %q says the plugin died on its own", err)
	}
}

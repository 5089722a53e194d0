package loader

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/base/proto"
)

// readPids reads the pids a test script wrote, one a line, waiting up to
// 5 seconds for want of them.
func readPids(t *testing.T, file string, want int) []int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		var pids []int
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if pid, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
				pids = append(pids, pid)
			}
		}
		if len(pids) >= want {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the script wrote %d pids, want %d", len(pids), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killPids SIGKILLs whatever of pids is left, after the test.
func killPids(t *testing.T, file string) {
	t.Cleanup(func() {
		b, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// A plugin-directory entry that is a shell script starting children: Launch
// must fail within the start timeout (not when the children exit) and leave
// none of them behind, whether the script waits for them without answering
// the handshake or exits at once while they hold its stdout or stderr.
func TestLaunchScriptWithChildren(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		pids       int
		timeout    time.Duration
		want       string
	}{
		{"no handshake", `sleep 30 & echo $! >>"$PIDS"; sleep 30 & echo $! >>"$PIDS"; wait`, 3,
			time.Second, "not a starpu plugin: no go-plugin handshake within 1s"},
		{"exits, child holds stdout", `sleep 30 & echo $! >>"$PIDS"; exit 0`, 2,
			10 * time.Second, "exited during start with exit status 0"},
		{"exits, child holds stderr", `sleep 30 >/dev/null & echo $! >>"$PIDS"; exit 4`, 2,
			10 * time.Second, "exited during start with exit status 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pids")
			killPids(t, pidFile)
			t.Setenv("STARPU_TEST_PIDS", pidFile)
			c := script(t, "driver-children", `PIDS="$STARPU_TEST_PIDS"; echo $$ >"$PIDS"; `+tc.body)
			start := time.Now()
			launchErr(t, c, tc.timeout, tc.want)
			if d := time.Since(start); d > tc.timeout/2+5*time.Second {
				t.Errorf("Launch took %s", d)
			}
			for _, pid := range readPids(t, pidFile, tc.pids) {
				waitGone(t, pid, "Launch failed")
			}
		})
	}
}

// A stopped plugin ignores everything but SIGKILL: Kill must still return
// within its grace period and a little, and the process be gone.
func TestKillStoppedPlugin(t *testing.T) {
	p, _, _ := launch(t, candidate(t, "sched-fake", ""))
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitState(t, p.Pid(), 'T')
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		p.Kill()
	}()
	select {
	case <-done:
	case <-time.After(KillGrace + 8*time.Second):
		syscall.Kill(p.Pid(), syscall.SIGKILL)
		t.Fatalf("Kill of a stopped plugin still running after %s", time.Since(start))
	}
	t.Logf("Kill took %s", time.Since(start).Round(time.Millisecond))
	if d := time.Since(start); d > KillGrace+killWait {
		t.Errorf("Kill took %s", d)
	}
	waitGone(t, p.Pid(), "Kill")
	if !p.Exited() {
		t.Error("Exited() false after Kill")
	}
}

// waitState waits up to 5 seconds for process pid to be in state (the
// letter of /proc/PID/stat: 'T' is stopped).
func waitState(t *testing.T, pid int, state byte) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not in state %c after 5s: %s", pid, state, b)
		}
		time.Sleep(time.Millisecond)
	}
}

// pluginSocket is the path of the unix socket plugin process pid listens
// on, found from its file descriptors and /proc/net/unix.
func pluginSocket(t *testing.T, pid int) string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && inodes[f[6]] && strings.HasPrefix(f[7], "/") {
			return f[7]
		}
	}
	t.Fatalf("plugin %d listens on no unix socket with a path", pid)
	return ""
}

// The plugin's socket lives in a directory private to its launch, which is
// gone once the plugin is killed, SIGKILL included.
func TestSocketDirRemoved(t *testing.T) {
	for _, how := range []string{"Kill", "SIGKILL"} {
		t.Run(how, func(t *testing.T) {
			p, _, _ := launch(t, candidate(t, "iface-fake", ""))
			sock := pluginSocket(t, p.Pid())
			for _, d := range []string{filepath.Dir(sock), filepath.Dir(filepath.Dir(sock))} {
				fi, err := os.Stat(d)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != 0o700 {
					t.Errorf("socket directory %s has mode %s, want 0700", d, fi.Mode())
				}
			}
			if how == "SIGKILL" {
				if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				select {
				case <-p.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("Done not closed 5s after SIGKILL")
				}
			}
			p.Kill()
			for _, path := range []string{sock, filepath.Dir(sock), filepath.Dir(filepath.Dir(sock))} {
				if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s left behind after %s (%v)", path, how, err)
				}
			}
		})
	}
}

// AutoMTLS: a client without the certificate the core gave the plugin
// cannot use the plugin's gRPC API, in clear or over TLS.
func TestPluginRefusesClientsWithoutCert(t *testing.T) {
	p, _, _ := launch(t, candidate(t, "sched-fake", ""))
	sock := pluginSocket(t, p.Pid())
	creds := map[string]credentials.TransportCredentials{
		"plaintext":        insecure.NewCredentials(),
		"TLS without cert": credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}),
	}
	for name, cr := range creds {
		t.Run(name, func(t *testing.T) {
			conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(cr))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			info, err := proto.NewBasePluginClient(conn).PluginInfo(ctx, &proto.PluginInfoRequest{})
			if err == nil {
				t.Fatalf("a client without the core's certificate called PluginInfo: %v", info)
			}
			t.Logf("refused: %v", err)
		})
	}
	// The core's own client still works.
	if _, err := p.raw.(base.Plugin).PluginInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The plugin gets the allow-listed part of the core's environment only.
func TestPluginEnvironment(t *testing.T) {
	t.Setenv("SECRET_TOKEN", "hunter2")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	t.Setenv("STARPU_SCHED_ALPHA", "2")
	t.Setenv("OMP_NUM_THREADS", "3")
	t.Setenv("LC_ALL", "C")
	t.Setenv("POCL_DEVICES", "cpu")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0")
	p, _, _ := launch(t, candidate(t, "sched-fake", ""))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[k] = v
		}
	}
	for _, k := range []string{"SECRET_TOKEN", "AWS_SECRET_ACCESS_KEY"} {
		if _, ok := env[k]; ok {
			t.Errorf("the plugin got %s", k)
		}
	}
	want := map[string]string{
		"STARPU_SCHED_ALPHA": "2", "OMP_NUM_THREADS": "3", "LC_ALL": "C", "POCL_DEVICES": "cpu",
		"CUDA_VISIBLE_DEVICES": "0", "OPENBLAS_NUM_THREADS": "1", base.EnvLogLevel: "debug",
		"PATH":                        os.Getenv("PATH"),
		base.Handshake.MagicCookieKey: base.Handshake.MagicCookieValue,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("the plugin's %s is %q, want %q", k, env[k], v)
		}
	}
	for _, k := range []string{"PLUGIN_CLIENT_CERT", "PLUGIN_UNIX_SOCKET_DIR"} {
		if env[k] == "" {
			t.Errorf("the plugin has no %s", k)
		}
	}
}

func TestPluginEnvFilter(t *testing.T) {
	got := pluginEnv([]string{"PATH=/bin", "HOME=/root", "SSH_AUTH_SOCK=/tmp/s", "STARPU_NCPU=2", "STARPUX=1",
		"LC_CTYPE=C", "LANG=C", "GITHUB_TOKEN=t", "OCL_ICD_VENDORS=/etc", "LD_PRELOAD=/x.so", "GODEBUG=x=1", "noequals"})
	want := []string{"PATH=/bin", "HOME=/root", "STARPU_NCPU=2", "LC_CTYPE=C", "LANG=C", "OCL_ICD_VENDORS=/etc", "GODEBUG=x=1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pluginEnv:\n got %q\nwant %q", got, want)
	}
}

// A plugin directory, a directory above it or a plugin that someone else
// could write is refused, with an error naming it and its mode.
func TestUnsafePaths(t *testing.T) {
	safe := func(t *testing.T) string {
		d := filepath.Join(t.TempDir(), "plugins")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	chmod := func(t *testing.T, p string, m os.FileMode) {
		t.Helper()
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	plugin := func(t *testing.T, dir string) Candidate {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(binDir, "sched-fake"))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "sched-fake")
		if err := os.WriteFile(path, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return Candidate{Path: path, Kind: base.KindScheduler, Name: "fake"}
	}
	discoverErr := func(t *testing.T, dir string, wants ...string) {
		t.Helper()
		_, err := Discover(dir)
		if !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("Discover(%s): %v, want an error wrapping ErrUnsafePath", dir, err)
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("Discover error %q does not say %q", err, w)
			}
		}
		t.Logf("error: %v", err)
	}

	t.Run("world-writable dir", func(t *testing.T) {
		d := safe(t)
		chmod(t, d, 0o777)
		discoverErr(t, d, "plugin directory "+d, d+" is writable by its group and all users (mode drwxrwxrwx, 0777)", "chmod go-w "+d)
		// A sticky bit does not make the plugin directory itself safe:
		// anyone could add a plugin.
		chmod(t, d, 0o777|os.ModeSticky)
		discoverErr(t, d, d+" is writable by its group and all users")
	})
	t.Run("group-writable dir", func(t *testing.T) {
		d := safe(t)
		chmod(t, d, 0o775)
		discoverErr(t, d, d+" is writable by its group (mode drwxrwxr-x, 0775)")
	})
	t.Run("writable parent", func(t *testing.T) {
		d := safe(t)
		parent := filepath.Dir(d)
		chmod(t, parent, 0o757)
		discoverErr(t, d, parent+" is writable by all users (mode drwxr-xrwx, 0757)")
		// ... unless it is sticky, as /tmp is.
		chmod(t, parent, 0o777|os.ModeSticky)
		if _, err := Discover(d); err != nil {
			t.Fatalf("Discover under a sticky parent: %v", err)
		}
	})
	t.Run("writable dir behind a link", func(t *testing.T) {
		d := safe(t)
		chmod(t, d, 0o777)
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(d, link); err != nil {
			t.Fatal(err)
		}
		discoverErr(t, link, d+" is writable")
	})
	t.Run("group-writable plugin", func(t *testing.T) {
		c := plugin(t, safe(t))
		chmod(t, c.Path, 0o775)
		if _, err := Discover(filepath.Dir(c.Path)); err != nil {
			t.Fatalf("Discover: %v (a bad plugin is refused by Launch, naming it)", err)
		}
		err := launchErr(t, c, 0, "refused", c.Path+" is writable by its group (mode -rwxrwxr-x, 0775)")
		if !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("error %v does not wrap ErrUnsafePath", err)
		}
	})
	t.Run("plugin linked from a writable dir", func(t *testing.T) {
		other := safe(t)
		target := plugin(t, other)
		chmod(t, other, 0o777)
		d := safe(t)
		c := Candidate{Path: filepath.Join(d, "sched-fake"), Kind: base.KindScheduler, Name: "fake"}
		if err := os.Symlink(target.Path, c.Path); err != nil {
			t.Fatal(err)
		}
		launchErr(t, c, 0, "refused", other+" is writable by its group and all users")
	})
	t.Run("owned by another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give a file away")
		}
		d := safe(t)
		c := plugin(t, d)
		if err := os.Chown(c.Path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		launchErr(t, c, 0, "refused", c.Path+" is owned by uid 65534, neither you (uid 0) nor root")
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		discoverErr(t, d, d+" is owned by uid 65534")
	})
	t.Run("safe", func(t *testing.T) {
		c := plugin(t, safe(t))
		if cs, err := Discover(filepath.Dir(c.Path)); err != nil || len(cs) != 1 {
			t.Fatalf("Discover: %v %v", cs, err)
		}
		log, _ := testLogger(t)
		p, err := Launch(context.Background(), c, Options{Arena: newArena(t), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		p.Kill()
	})
}

// The sweep removes the socket directories of dead cores of this user
// only.
func TestSweepStaleSockDirs(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(pid int) string {
		d, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", sockDirPrefix, pid))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.WriteFile(filepath.Join(d, "plugin123"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	gone := mk(dead.Process.Pid)
	alive := mk(os.Getppid())
	mine := mk(os.Getpid())
	sweepStaleSockDirs(hclog.NewNullLogger())
	if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory of a dead core is still there (%v)", err)
	}
	for _, d := range []string{alive, mine} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the directory of a live core was removed: %v", err)
		}
	}
}

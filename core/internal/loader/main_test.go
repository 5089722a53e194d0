package loader

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/internal/syncbuf"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// binDir holds the test plugins, built once by TestMain.
var binDir string

// The test binary doubles as a helper process (a stand-in for the core that
// gets killed), selected by these variables.
const (
	helperEnv       = "STARPU_LOADER_TEST_HELPER"
	helperPluginEnv = "STARPU_LOADER_TEST_PLUGIN"
	helperDirEnv    = "STARPU_LOADER_TEST_DIR"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	dir, err := os.MkdirTemp("", "starpu-loader-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"./testdata/plugins/driver-fake", "./testdata/plugins/sched-fake", "./testdata/plugins/iface-fake", "./testdata/plugins/sched-oldapi")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test plugins:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "built the test plugins in %s\n", time.Since(start).Round(time.Millisecond))
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// helperMain is the helper process: it starts the plugin named by
// helperPluginEnv, prints "pid <plugin pid>" and sleeps until killed.
//
//	launch: with Launch, as the core does.
//	raw:    by hand, answering the handshake variables but without
//	        Pdeathsig, so that only the plugin's parent watchdog can end it.
func helperMain(mode string) int {
	path := os.Getenv(helperPluginEnv)
	arena, err := shm.Create(1<<20, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var pid int
	switch mode {
	case "launch":
		kind, name, _ := ParseName(filepath.Base(path))
		p, err := Launch(context.Background(), Candidate{Path: path, Kind: kind, Name: name}, Options{Arena: arena})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pid = p.Pid()
	case "raw":
		dir := os.Getenv(helperDirEnv)
		out, err := os.Create(filepath.Join(dir, "stdout"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		errf, err := os.Create(filepath.Join(dir, "stderr"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cmd := exec.Command(path)
		cmd.Env = append(os.Environ(),
			base.Handshake.MagicCookieKey+"="+base.Handshake.MagicCookieValue,
			"PLUGIN_PROTOCOL_VERSIONS="+strconv.Itoa(base.APIVersion))
		cmd.ExtraFiles = []*os.File{arena.File()}
		cmd.Stdout, cmd.Stderr = out, errf
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// Wait for the handshake line: the plugin is serving.
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(out.Name())
			if bytes.Contains(b, []byte("|grpc")) {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "plugin did not answer")
				return 1
			}
			time.Sleep(10 * time.Millisecond)
		}
		pid = cmd.Process.Pid
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		return 1
	}
	fmt.Printf("pid %d\n", pid)
	time.Sleep(time.Hour)
	return 0
}

// startHelper runs the helper process in mode on plugin path and returns it
// with the pid of the plugin it started.
func startHelper(t *testing.T, mode, path string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperPluginEnv+"="+path, helperDirEnv+"="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		io.Copy(io.Discard, stdout)
	}()
	select {
	case s := <-line:
		pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(s, "pid ")))
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper said %q: %v; stderr: %s", s, err, stderr.String())
		}
		return cmd, pid
	case <-time.After(20 * time.Second):
		t.Fatal("helper did not start its plugin")
	}
	return nil, 0
}

// processGone reports whether pid has ended (a zombie has ended: an orphan
// is reaped by whatever init the machine has).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

// testLogger logs into a buffer, shown if the test fails.
func testLogger(t *testing.T) (hclog.Logger, *syncbuf.Buffer) {
	buf := &syncbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("core log:\n%s", buf.String())
		}
	})
	return hclog.New(&hclog.LoggerOptions{Name: "core", Output: buf, Level: hclog.Debug}), buf
}

// newArena is a fresh arena, closed after the test (after the plugins
// using it are killed: cleanups run last registered first).
func newArena(t testing.TB) *shm.Arena {
	t.Helper()
	a, err := shm.Create(8<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// candidate is the test plugin built as file, copied as name when name is
// not file (so that one fake plays several plugins).
func candidate(t *testing.T, file, as string) Candidate {
	t.Helper()
	path := filepath.Join(binDir, file)
	if as != "" && as != file {
		dir := t.TempDir()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(dir, as)
		if err := os.WriteFile(path, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kind, name, ok := ParseName(filepath.Base(path))
	if !ok {
		t.Fatalf("bad plugin file name %s", path)
	}
	return Candidate{Path: path, Kind: kind, Name: name}
}

// launch starts c with a fresh arena and the test logger and kills it after
// the test.
func launch(t *testing.T, c Candidate) (*Plugin, *shm.Arena, *syncbuf.Buffer) {
	t.Helper()
	log, buf := testLogger(t)
	a := newArena(t)
	p, err := Launch(context.Background(), c, Options{Arena: a, Logger: log, StartTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p, a, buf
}

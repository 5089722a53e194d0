package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// allSchedDir is a plugin directory with every scheduler plugin the
// repository builds and the test's driver-cpu, built once, beside
// pluginDir (TestMain removes it).
var allSchedDir = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(filepath.Dir(pluginDir), "all-sched")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	pkgs := map[string]string{
		"ws": "../../plugins/sched-ws", "dmda": "../../plugins/sched-dmda", "eager": "../../examples/sched-eager",
		"prio": "../../plugins/sched-prio", "random": "../../plugins/sched-random", "lws": "../../plugins/sched-lws",
		"heteroprio": "../../plugins/sched-heteroprio",
	}
	for name, pkg := range pkgs {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "sched-"+name), pkg).CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
		}
	}
	return dir, os.Symlink(filepath.Join(pluginDir, "driver-cpu"), filepath.Join(dir, "driver-cpu"))
})

// TestSchedList lists a plugin directory holding every scheduler plugin
// the repository builds: each policy with its description, StarPU's
// aliases, and the settings with their defaults.
func TestSchedList(t *testing.T) {
	dir, err := allSchedDir()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"sched", "list", "--plugin-dir", dir}, &out); err != nil {
		t.Fatalf("sched list: %v\n%s", err, out.String())
	}
	var names []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") {
			names = append(names, strings.Fields(line)[0])
		}
	}
	if got := strings.Join(names, " "); got != "dmda dmdar dmdas eager heteroprio lws prio random ws" {
		t.Fatalf("policies listed: %q\n%s", got, out.String())
	}
	for _, want := range []string{
		"dmdas         = dmda with sorted = true",
		"dmdar         = dmda with ready = true",
		"eager         one central FIFO (StarPU's eager)",
		"lws           locality work stealing (StarPU's lws)",
		"prio          one central queue by priority (StarPU's prio)",
		"ws (default)  work stealing",
		`cuda_order = "" (string)`,
		"cuda_speed = 13.33 (float)",
		"sorted = false (bool)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("listing lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSchedCommandErrors: what sched refuses, with the exit status of a
// usage error.
func TestSchedCommandErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sched"}, "sched: which subcommand? (list)"},
		{[]string{"sched", "show"}, `sched: unknown subcommand "show" (list)`},
		{[]string{"sched", "list", "extra"}, `sched list: unexpected argument "extra"`},
		{[]string{"sched", "list", "--sched", "ws"}, "sched list takes no --sched: it lists every policy"},
		{[]string{"sched", "list", "--plugin-dir", "/nonexistent/plugins"}, "plugin directory /nonexistent/plugins does not exist"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := cli(context.Background(), c.args, &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("starpu %s: exit %d, stderr %q; want an error holding %q", strings.Join(c.args, " "), code, stderr.String(), c.want)
		}
	}
}

// TestCholeskyEveryPolicy runs a small tiled Cholesky (dependencies,
// priorities, real plugin processes) under every policy and alias named
// by --sched: each must give the verified factorisation.
func TestCholeskyEveryPolicy(t *testing.T) {
	dir, err := allSchedDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ws", "lws", "eager", "prio", "random", "heteroprio", "dmda", "dmdas", "dmdar"} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			args := []string{"run", "cholesky", "--size", "384", "--nblocks", "6", "--plugin-dir", dir, "--ncpu", "2", "--sched", name}
			if err := run(context.Background(), args, &out); err != nil {
				t.Fatalf("starpu %s: %v\n%s", strings.Join(args, " "), err, out.String())
			}
			if !strings.Contains(out.String(), "verified=true") {
				t.Fatalf("not verified:\n%s", out.String())
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// TestCLI checks what the command line answers without starting a runtime:
// the version, help on stdout with status 0, usage errors on stderr with
// status 2, and flags refused where they mean nothing, with an error that
// names the flag and the command.
func TestCLI(t *testing.T) {
	apiLine := fmt.Sprintf("plugin API version: %d\n", base.APIVersion)
	for _, c := range []struct {
		args       []string
		code       int
		stdout     []string // substrings stdout must hold
		stderr     []string // substrings stderr must hold
		notStdout  []string // substrings stdout must not hold
		emptyOther bool     // the stream not checked above is empty
	}{
		// The version.
		{args: []string{"version"}, stdout: []string{"starpu ", "go: go1.", apiLine, "shared-memory arena version: "}, emptyOther: true},
		{args: []string{"--version"}, stdout: []string{"starpu ", apiLine}, emptyOther: true},
		{args: []string{"-version"}, stdout: []string{"starpu ", apiLine}, emptyOther: true},
		{args: []string{"version", "-h"}, stdout: []string{"usage: starpu version", "It takes no flags."}, emptyOther: true},
		{args: []string{"version", "extra"}, code: 2, stderr: []string{`version: unexpected argument "extra"`}},
		{args: []string{"version", "--ncpu", "2"}, code: 2, stderr: []string{"version takes no --ncpu"}},

		// Help: stdout, status 0.
		{args: []string{"-h"}, stdout: []string{"usage: starpu <command>", "\n  version ", "\n  run cholesky "}, emptyOther: true},
		{args: []string{"--help"}, stdout: []string{"usage: starpu <command>"}, emptyOther: true},
		{args: []string{"-help"}, stdout: []string{"usage: starpu <command>"}, emptyOther: true},
		{args: []string{"help"}, stdout: []string{"usage: starpu <command>"}, emptyOther: true},
		{args: []string{"run", "-h"}, stdout: []string{"usage: starpu <command>"}, emptyOther: true},
		{args: []string{"bench", "--help"}, stdout: []string{"usage: starpu <command>"}, emptyOther: true},
		{args: []string{"perfmodel", "-h"}, stdout: []string{"usage: starpu <command>"}, emptyOther: true},
		{args: []string{"run", "vector-scal", "-h"}, stdout: []string{"usage: starpu run vector-scal [flags]", "-nparts", "-ncpu N", "-trace FILE"},
			notStdout: []string{"-precision"}, emptyOther: true},
		{args: []string{"run", "vector-scal", "--help", "--size", "nonsense"}, stdout: []string{"usage: starpu run vector-scal"}, emptyOther: true},
		{args: []string{"help", "run", "cholesky"}, stdout: []string{"usage: starpu run cholesky [flags]", "-precision"}, emptyOther: true},
		{args: []string{"help", "perfmodel", "plot"}, stdout: []string{"usage: starpu perfmodel plot [flags] NAME", "-o FILE"}, emptyOther: true},
		{args: []string{"perfmodel", "show", "-h"}, stdout: []string{"usage: starpu perfmodel show [flags] NAME", "-dir DIR"}, notStdout: []string{"-o "}, emptyOther: true},
		{args: []string{"bench", "bandwidth", "-h"}, stdout: []string{"-reps"}, notStdout: []string{"-sched", "-ncpu", "-trace"}, emptyOther: true},
		{args: []string{"bench", "sgemm", "-h"}, stdout: []string{"-threads"}, notStdout: []string{"-config", "-plugin-dir", "-sched", "-ncpu", "-trace"}, emptyOther: true},
		{args: []string{"machine", "-h"}, stdout: []string{"-sched", "-ncpu"}, notStdout: []string{"-trace"}, emptyOther: true},

		// Usage errors: stderr, status 2.
		{args: nil, code: 2, stderr: []string{"no command given", "usage: starpu <command>"}, emptyOther: true},
		{args: []string{"frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`, "usage: starpu <command>"}, emptyOther: true},
		{args: []string{"--bogus"}, code: 2, stderr: []string{"unknown flag --bogus"}, emptyOther: true},
		{args: []string{"help", "frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`}, emptyOther: true},
		{args: []string{"run"}, code: 2, stderr: []string{"run: which workload?"}, emptyOther: true},
		{args: []string{"run", "fft"}, code: 2, stderr: []string{`run: unknown workload "fft"`}, emptyOther: true},
		{args: []string{"bench", "fft"}, code: 2, stderr: []string{`bench: unknown benchmark "fft"`}, emptyOther: true},
		{args: []string{"perfmodel", "erase"}, code: 2, stderr: []string{`perfmodel: unknown subcommand "erase"`}, emptyOther: true},
		{args: []string{"run", "vector-scal", "--bogus"}, code: 2, stderr: []string{"run vector-scal: unknown flag --bogus", "starpu run vector-scal -h"}, emptyOther: true},
		{args: []string{"run", "vector-scal", "--size", "big"}, code: 2, stderr: []string{`run vector-scal: invalid value "big" for flag -size`}, emptyOther: true},
		{args: []string{"run", "vector-scal", "--ncpu", "some"}, code: 2, stderr: []string{`run vector-scal: invalid value "some" for flag -ncpu`}, emptyOther: true},
		{args: []string{"run", "vector-scal", "--ncpu", "-2"}, code: 2, stderr: []string{"run vector-scal: --ncpu -2 is out of range"}, emptyOther: true},
		{args: []string{"run", "vector-scal", "leftover"}, code: 2, stderr: []string{`run vector-scal: unexpected argument "leftover"`}, emptyOther: true},
		{args: []string{"run", "cholesky", "--mpi", "--variants"}, code: 2, stderr: []string{"cholesky: --variants is for one node"}, emptyOther: true},
		{args: []string{"bench", "kernels", "--size", "100", "--nblocks", "3"}, code: 2, stderr: []string{"bench kernels: size (100) must be a positive multiple of nblocks (3)"}, emptyOther: true},
		{args: []string{"bench", "sgemm", "--threads", "0"}, code: 2, stderr: []string{"bench sgemm: --threads 0 is out of range"}, emptyOther: true},
		{args: []string{"bench", "soak", "--max-growth-pct", "-1"}, code: 2, stderr: []string{"bench soak: --max-growth-pct -1 is out of range"}, emptyOther: true},

		// Flags that mean nothing for the command: refused, naming both.
		{args: []string{"run", "vector-scal", "--precision", "double"}, code: 2, stderr: []string{"run vector-scal: unknown flag --precision"}, emptyOther: true},
		{args: []string{"bench", "soak", "--nblocks", "4"}, code: 2, stderr: []string{"bench soak: unknown flag --nblocks"}, emptyOther: true},
		{args: []string{"machine", "--trace", "t.json"}, code: 2, stderr: []string{"machine takes no --trace: it runs no task"}, emptyOther: true},
		{args: []string{"bench", "bandwidth", "--sched", "ws"}, code: 2, stderr: []string{"bench bandwidth takes no --sched: it runs no task"}, emptyOther: true},
		{args: []string{"bench", "bandwidth", "--ncpu", "2"}, code: 2, stderr: []string{"bench bandwidth takes no --ncpu"}, emptyOther: true},
		{args: []string{"bench", "bandwidth", "--trace", "t.json"}, code: 2, stderr: []string{"bench bandwidth takes no --trace"}, emptyOther: true},
		{args: []string{"bench", "sgemm", "--ncpu", "2"}, code: 2, stderr: []string{"bench sgemm takes no --ncpu: it calls OpenBLAS directly"}, emptyOther: true},
		{args: []string{"bench", "sgemm", "--plugin-dir", "bin/plugins"}, code: 2, stderr: []string{"bench sgemm takes no --plugin-dir"}, emptyOther: true},
		{args: []string{"perfmodel", "list", "--sched", "ws"}, code: 2, stderr: []string{"perfmodel list takes no --sched"}, emptyOther: true},
		{args: []string{"perfmodel", "show", "gemm", "-o", "x.svg"}, code: 2, stderr: []string{"perfmodel show takes no -o: only perfmodel plot writes a file"}, emptyOther: true},
		{args: []string{"run", "spmv", "--mtx", "m.mtx", "--nnz", "1000"}, code: 2, stderr: []string{"run spmv: --nnz means nothing with --mtx"}, emptyOther: true},
		{args: []string{"run", "spmv", "--matrix", "banded", "--mtx", "m.mtx"}, code: 2, stderr: []string{"run spmv: --matrix means nothing with --mtx"}, emptyOther: true},
		{args: []string{"run", "cg", "--mtx", "m.mtx", "--nnz", "1000"}, code: 2, stderr: []string{"run cg: --nnz means nothing with --mtx"}, emptyOther: true},
		{args: []string{"bench", "overhead", "--independent", "--buffers", "1"}, code: 2, stderr: []string{"--independent tasks take no buffers"}, emptyOther: true},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli(context.Background(), c.args, &stdout, &stderr)
			if code != c.code {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, stdout.String(), stderr.String())
			}
			for _, w := range c.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range c.notStdout {
				if strings.Contains(stdout.String(), w) {
					t.Errorf("stdout holds %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if c.emptyOther {
				other, name := &stderr, "stderr"
				if c.code != 0 {
					other, name = &stdout, "stdout"
				}
				if other.Len() != 0 {
					t.Errorf("%s is not empty:\n%s", name, other.String())
				}
			}
		})
	}
}

// TestHelpText: every command answers -h on stdout with status 0, and its
// help shows no sentinel for a default (a negative number standing for
// "not given", a nil, an empty value): a default is a real value or is
// said in words.
func TestHelpText(t *testing.T) {
	sentinel := regexp.MustCompile(`\(default -\d|<nil>|\(default ""\)|\(default 0\)|\(default 0s\)`)
	for _, cmd := range [][]string{
		{"version"}, {"machine"},
		{"run", "vector-scal"}, {"run", "cholesky"}, {"run", "spmv"}, {"run", "cg"},
		{"bench", "overhead"}, {"bench", "bandwidth"}, {"bench", "sgemm"}, {"bench", "soak"},
		{"perfmodel", "list"}, {"perfmodel", "show"}, {"perfmodel", "plot"},
	} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli(context.Background(), append(append([]string(nil), cmd...), "-h"), &stdout, &stderr); code != 0 || stderr.Len() != 0 {
				t.Fatalf("exit status %d, stderr %q; want 0 and nothing", code, stderr.String())
			}
			help := stdout.String()
			if want := "usage: starpu " + strings.Join(cmd, " "); !strings.HasPrefix(help, want) {
				t.Errorf("help does not open with %q:\n%s", want, help)
			}
			if m := sentinel.FindString(help); m != "" {
				t.Errorf("help shows %q, a sentinel for a default:\n%s", m, help)
			}
		})
	}
}

// TestBuildVersion: the version read from the build information is never
// empty, and says which revision a development build comes from.
func TestBuildVersion(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build information", nil, "devel"},
		{"tagged module", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"devel without VCS", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"devel clean", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, "devel (rev 0123456789ab)"},
		{"devel modified", &debug.BuildInfo{Main: debug.Module{Version: ""},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, "devel (rev 0123456789ab, modified)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := buildVersion(c.bi); got != c.want {
				t.Errorf("buildVersion = %q, want %q", got, c.want)
			}
		})
	}
	if v := toolVersion(); v == "" {
		t.Error("toolVersion is empty")
	}
}

// TestBinaryVersionAndStatus builds the tool with its version set at link
// time, as a release is, and checks what the real binary prints and the
// statuses main exits with.
func TestBinaryVersionAndStatus(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "starpu")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-test", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args           []string
		code           int
		stdout, stderr string // prefixes
	}{
		{[]string{"version"}, 0, "starpu v9.8.7-test\n", ""},
		{[]string{"--version"}, 0, "starpu v9.8.7-test\n", ""},
		{[]string{"--help"}, 0, "usage: starpu <command>", ""},
		{[]string{"bench", "sgemm", "-h"}, 0, "usage: starpu bench sgemm", ""},
		{nil, 2, "", "starpu: no command given\nusage: starpu <command>"},
		{[]string{"frobnicate"}, 2, "", `starpu: unknown command "frobnicate"`},
		{[]string{"bench", "sgemm", "--sched", "ws"}, 2, "", "starpu: bench sgemm takes no --sched"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, c.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code || !strings.HasPrefix(stdout.String(), c.stdout) || !strings.HasPrefix(stderr.String(), c.stderr) ||
				(c.stdout == "") != (stdout.Len() == 0) || (c.stderr == "") != (stderr.Len() == 0) {
				t.Errorf("status %d, stdout:\n%s\nstderr:\n%s\nwant status %d, stdout starting %q, stderr starting %q",
					code, stdout.String(), stderr.String(), c.code, c.stdout, c.stderr)
			}
		})
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// scripts/starpu_cholesky.c is the StarPU side of scripts/cholesky-ab.sh's
// runtime-to-runtime ratio: the factorisation `run cholesky` runs, on
// StarPU 1.3. It must factorise correctly under both policies the script
// runs and on both layouts, and its check must catch a wrong update, or the
// ratio would compare against a program that does less work.
func TestStarPUPeerCholesky(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a StarPU program")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler")
	}
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "starpu-1.3").Output()
	if err != nil {
		t.Skip("no StarPU 1.3 development files (libstarpu-dev): pkg-config starpu-1.3 failed")
	}
	src, err := os.ReadFile("../../scripts/starpu_cholesky.c")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	build := func(name string, src []byte) string {
		t.Helper()
		c := filepath.Join(dir, name+".c")
		if err := os.WriteFile(c, src, 0o644); err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(dir, name)
		args := append([]string{"-O2", "-o", exe, c}, strings.Fields(string(flags))...)
		args = append(args, "-llapacke", "-lopenblas", "-lm")
		if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %s: %v\n%s", name, err, out)
		}
		return exe
	}
	run := func(exe, sched string, flags ...string) (string, error) {
		cmd := exec.Command(exe, append([]string{"-size", "256", "-nblocks", "4", "-check"}, flags...)...)
		// STARPU_HOME keeps the performance models out of the user's.
		cmd.Env = append(os.Environ(), "STARPU_NCPU=2", "STARPU_SILENT=1", "OPENBLAS_NUM_THREADS=1",
			"STARPU_SCHED="+sched, "STARPU_HOME="+dir)
		out, err := cmd.Output()
		return string(out), err
	}

	good := build("same", src)
	line := regexp.MustCompile(`^starpu cholesky-same size=256 nblocks=4 layout=(\w+) sched=(\w+) ms=[0-9.]+ gflops=[0-9.]+ backward_error=(\S+) verified=true\n$`)
	layouts := []string{"partition", "contiguous"}
	for _, layout := range layouts {
		for _, sched := range []string{"lws", "dmda"} {
			out, err := run(good, sched, "-layout", layout)
			if err != nil {
				t.Fatalf("%s, %s: %v\n%s", layout, sched, err, out)
			}
			if m := line.FindStringSubmatch(out); m == nil || m[1] != layout || m[2] != sched {
				t.Errorf("%s, %s: output %q", layout, sched, out)
			}
		}
	}

	// Bad arguments are refused before StarPU starts.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-size", "100", "-nblocks", "3"}, "-size 100 must be a positive multiple of -nblocks 3"},
		{[]string{"-layout", "tiled"}, "-layout tiled: want partition or contiguous"},
	} {
		bad := exec.Command(good, c.args...)
		if out, err := bad.CombinedOutput(); err == nil || bad.ProcessState.ExitCode() != 2 ||
			!strings.Contains(string(out), c.want) {
			t.Errorf("%v: %v\n%s", c.args, err, out)
		}
	}

	// -profile adds the workers' share of the run in kernels, in (0, 1].
	out, err := run(good, "lws", "-profile")
	m := regexp.MustCompile(` verified=true kernel_share=([0-9.]+)\n$`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("-profile: %v, output %q", err, out)
	}
	if share, _ := strconv.ParseFloat(m[1], 64); share <= 0 || share > 1 {
		t.Errorf("-profile: kernel share %v, want one in (0, 1]", share)
	}

	// The same program with the trailing update's GEMM subtracting half of
	// the product: the check must refuse its factor.
	gemm := strings.Index(string(src), "static void gemm_cpu")
	alpha := strings.Index(string(src)[gemm:], "-1.0f,")
	if gemm < 0 || alpha < 0 {
		t.Fatal("no GEMM call with alpha -1 in scripts/starpu_cholesky.c")
	}
	wrong := []byte(string(src[:gemm+alpha]) + "-0.5f," + string(src[gemm+alpha+len("-1.0f,"):]))
	wrongExe := build("wrong", wrong)
	for _, layout := range layouts {
		out, err = run(wrongExe, "lws", "-layout", layout)
		if err == nil || !strings.Contains(out, "verified=false") {
			t.Errorf("%s: a wrong GEMM passed the check: %v\n%s", layout, err, out)
		}
	}
}

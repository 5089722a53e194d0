package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// scripts/scaling.sh is the workers scaling study, run where a machine has
// the cores (scripts/gpu-run.sh on the 16-core GPU machine). Run small
// here, it must give one row per workload, policy and worker count, leave
// out the counts this machine has no cores for, and fail when a run loses
// tasks.
func TestScalingScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bench overhead 10 times")
	}
	bin := buildCLI(t)
	run := func(env ...string) (string, string, error) {
		cmd := exec.Command("bash", "../../scripts/scaling.sh")
		cmd.Env = append(os.Environ(), append([]string{"BIN=" + bin, "PLUGINS=" + pluginDir, "TASKS=300", "ROUNDS=2", "SCHEDS=ws"}, env...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return string(out), stderr.String(), err
	}
	out, stderr, err := run("WORKERS=1 2 100000")
	if err != nil {
		t.Fatalf("scaling.sh: %v\n%s%s", err, out, stderr)
	}
	if !strings.Contains(stderr, "100000 workers left out: this machine has") {
		t.Errorf("no word of the worker count left out:\n%s", stderr)
	}
	head := strings.Index(out, "\nworkload ")
	if head < 0 {
		t.Fatalf("no table:\n%s", out)
	}
	table := out[head:]
	const figures = ` +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+% +[0-9]+$`
	for _, row := range []string{"independent +ws +1", "independent/4 +ws +2", "chain +ws +1", "tags +ws +2", "chains/2 +ws +2"} {
		if !regexp.MustCompile(`(?m)^` + row + figures).MatchString(table) {
			t.Errorf("no row %q in\n%s", row, table)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^\S+ +ws +[12]`+figures).FindAllString(table, -1)); n != 10 {
		t.Errorf("%d rows, want 5 workloads x 2 worker counts:\n%s", n, table)
	}

	// A policy the plugin directory does not hold stops the study.
	if out, stderr, err := run("WORKERS=1", "SCHEDS=nosuch"); err == nil {
		t.Errorf("SCHEDS=nosuch: no error\n%s%s", out, stderr)
	}

	// So does a run that reports fewer tasks than it was given (a stand-in
	// for the tool: the script's own check is what is tested).
	lossy := filepath.Join(t.TempDir(), "lossy")
	if err := os.WriteFile(lossy, []byte("#!/bin/sh\necho 'starpu overhead executed=5 per_task_us=1 submit_us=1 engine_cpu_us=1'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = run("WORKERS=1", "BIN="+lossy)
	if err == nil || !strings.Contains(stderr, "independent, ws, 1 workers: 5 tasks ran of 600") {
		t.Errorf("lost tasks: %v\n%s%s", err, out, stderr)
	}
}

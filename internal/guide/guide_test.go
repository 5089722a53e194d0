package guide

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// script turns a guide into one shell script: its sh blocks as they are,
// and each go block under a "`NAME`:" line written to file NAME at that
// point. want is the guide's output block: what the last command prints.
func script(guide string) (sh, want string, err error) {
	var b strings.Builder
	b.WriteString("set -euo pipefail\n")
	var (
		inBlock, lang, file string
		body                strings.Builder
		prev                string
	)
	sc := bufio.NewScanner(strings.NewReader(guide))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inBlock == "" && strings.HasPrefix(line, "```"):
			inBlock, lang = "yes", strings.TrimPrefix(line, "```")
			file = ""
			if lang == "go" && strings.HasPrefix(prev, "`") && strings.HasSuffix(prev, "`:") {
				file = strings.TrimSuffix(strings.TrimPrefix(prev, "`"), "`:")
			}
			body.Reset()
		case inBlock != "" && line == "```":
			switch {
			case lang == "sh":
				b.WriteString(body.String())
			case lang == "go" && file != "":
				fmt.Fprintf(&b, "cat > %s <<'GUIDE_EOF'\n%sGUIDE_EOF\n", file, body.String())
			case lang == "output":
				want = body.String()
			}
			inBlock = ""
		case inBlock != "":
			body.WriteString(line + "\n")
		case strings.TrimSpace(line) != "":
			prev = strings.TrimSpace(line)
		}
	}
	if inBlock != "" {
		return "", "", fmt.Errorf("unterminated %s block", lang)
	}
	if want == "" {
		return "", "", fmt.Errorf("no output block")
	}
	return b.String(), want, sc.Err()
}

// TestFirstApplication runs docs/first-application.md from the
// repository's root with an empty home directory (so `make install
// PREFIX=$HOME/.local` installs there and the program finds its plugins
// there, with no variable set), keeping Go's caches. The program's last
// output must be the page's.
func TestFirstApplication(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and installs the runtime")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "first-application.md"))
	if err != nil {
		t.Fatal(err)
	}
	sh, want, err := script(string(page))
	if err != nil {
		t.Fatalf("docs/first-application.md: %v", err)
	}
	for _, needed := range []string{"make install", "go build", "Kernels:"} {
		if !strings.Contains(sh, needed) {
			t.Fatalf("the guide no longer does %q; this test follows it", needed)
		}
	}
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	vals := strings.Split(strings.TrimSpace(string(goEnv)), "\n")
	if len(vals) != 4 {
		t.Fatalf("go env: %q", goEnv)
	}
	home := t.TempDir()
	cmd := exec.Command("bash", "-c", sh)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"HOME="+home,
		"GOCACHE="+vals[0], "GOMODCACHE="+vals[1], "GOPATH="+vals[2], "GOPROXY="+vals[3],
		"STARPU_PLUGIN_DIR=", "STARPU_PLUGIN_PATH=", "STARPU_NCPU=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("following the guide: %v\n--- script\n%s\n--- stdout\n%s\n--- stderr\n%s", err, sh, stdout.String(), stderr.String())
	}
	if !strings.HasSuffix(stdout.String(), want) {
		t.Fatalf("the program printed\n%s\nthe guide shows\n%s\nstderr:\n%s", stdout.String(), want, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(home, ".local", "lib", "starpu", "plugins", "sched-ws")); err != nil {
		t.Fatalf("make install did not install the plugins under the home directory: %v", err)
	}
}

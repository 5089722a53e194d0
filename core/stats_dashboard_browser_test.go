package core_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

// envScreenshot names a file the browser test copies its screenshot to,
// for a person to look at.
const envScreenshot = "STARPU_TEST_DASHBOARD_SCREENSHOT"

// TestDashboardInBrowser loads the dashboard in headless Chromium against
// a runtime whose workers are busy with products on the real CPU driver,
// and checks what the page shows: the workers by name, the tasks done, the
// memory nodes, the plugins as healthy; and that its screenshot is a
// picture of a page.
func TestDashboardInBrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: the dashboard's browser test needs it (scripts/setup.sh installs it: apt-get install chromium)")
	}
	rt, err := core.Init(context.Background(), core.Options{Config: testConfig(pluginDir), Dashboard: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()

	// The workload: products on four matrices, submitted in rounds until
	// the browser is done, so that both workers stay busy.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	const order = 160
	a := make([]float32, order*order)
	ha, err := core.RegisterMatrix(rt, a, order, order, order)
	if err != nil {
		t.Fatal(err)
	}
	var cs []*core.Handle
	for range 4 {
		h, err := core.RegisterMatrix(rt, make([]float32, order*order), order, order, order)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, h)
	}
	gemm := &core.Codelet{Name: "gemm_f32", Kernels: map[driver.Arch]string{driver.CPU: blasarg.GemmF32}, Modes: []core.Mode{core.R, core.R, core.RW}}
	arg := blasarg.GemmArg{Alpha: 1, Beta: 1}.Encode()
	workErr := make(chan error, 1)
	wg.Go(func() {
		for ctx.Err() == nil {
			for range 8 {
				for _, hc := range cs {
					if err := rt.Submit(&core.Task{Codelet: gemm, Handles: []*core.Handle{ha, ha, hc}, Arg: arg}); err != nil {
						workErr <- err
						return
					}
				}
			}
			if err := rt.WaitForAll(); err != nil {
				workErr <- err
				return
			}
		}
	})
	for deadline := time.Now().Add(30 * time.Second); rt.Progress().Done < 16; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the workload did not start: %+v", rt.Progress())
		}
	}

	dir := t.TempDir()
	shot := filepath.Join(dir, "dashboard.png")
	bctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Virtual time runs the page's polls (every 250 ms of it) back to
	// back while the budget lasts, then the DOM and the picture are taken.
	cmd := exec.CommandContext(bctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=1400,1000", "--virtual-time-budget=3000",
		"--screenshot="+shot, "--dump-dom", "http://"+rt.DashboardAddr()+"/?interval=250")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, tail(stderr.String(), 2000))
	}
	t.Logf("chromium took %s", time.Since(start).Round(time.Millisecond))
	stop()
	wg.Wait()
	select {
	case err := <-workErr:
		t.Fatalf("workload: %v", err)
	default:
	}

	page := string(dom)
	if status := textOf(page, `<span id="status"[^>]*>(.*?)</span>`); !strings.HasPrefix(status, "updated") {
		t.Fatalf("page status %q, want updated ...; page:\n%s", status, tail(page, 4000))
	}
	workers := tableRows(page, "workers")
	if len(workers) != len(rt.Workers()) {
		t.Fatalf("page shows %d workers, the runtime has %d: %v", len(workers), len(rt.Workers()), workers)
	}
	var done int64
	for i, w := range rt.Workers() {
		row := workers[i]
		if want := fmt.Sprintf("worker %d (%s %s)", w.ID, w.Arch, w.Unit); row["name"] != want {
			t.Errorf("worker row %d names %q, want %q", i, row["name"], want)
		}
		n, err := strconv.ParseInt(row["num done"], 10, 64)
		if err != nil {
			t.Errorf("worker row %d: done %q", i, row["num done"])
		}
		done += n
	}
	total, err := strconv.ParseInt(textOf(page, `<b id="done">(.*?)</b>`), 10, 64)
	if err != nil || total < 16 || done != total {
		t.Errorf("page shows %q tasks done, the workers' rows %d; want the same, at least 16", textOf(page, `<b id="done">(.*?)</b>`), done)
	}
	if tp := textOf(page, `<b id="throughput">(.*?)</b>`); tp == "" || tp == "0" || tp == "0.0" {
		t.Errorf("page shows throughput %q while tasks run", tp)
	}
	nodes := tableRows(page, "nodes")
	if len(nodes) == 0 || nodes[0]["name"] != "RAM" || !strings.Contains(nodes[0]["num"], "/") {
		t.Errorf("memory nodes on the page: %v", nodes)
	}
	health := map[string]string{}
	for _, p := range tableRows(page, "plugins") {
		health[p["name"]] = p["health"]
	}
	for _, name := range []string{"driver-cpu", "sched-ws (" + core.GlobalSchedContextName + ")"} {
		if health[name] != "ok" {
			t.Errorf("plugin %s shows health %q, want ok (plugins: %v)", name, health[name], health)
		}
	}

	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, tail(stderr.String(), 2000))
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 1000 {
		t.Errorf("screenshot is %v, want 1400x1000", b)
	}
	colors := map[[4]uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y && len(colors) < 64; y += 7 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 7 {
			r, g, b, a := img.At(x, y).RGBA()
			colors[[4]uint32{r, g, b, a}] = true
		}
	}
	if len(colors) < 64 {
		t.Errorf("screenshot has %d colours: a blank page?", len(colors))
	}
	if keep := os.Getenv(envScreenshot); keep != "" {
		b, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(keep, b, 0o644)
		}
		if err != nil {
			t.Errorf("keep the screenshot ($%s): %v", envScreenshot, err)
		}
	}
}

// textOf is the text of the first match of re's group in page, tags
// removed.
func textOf(page, re string) string {
	m := regexp.MustCompile(`(?s)` + re).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(strings.TrimSpace(tagRE.ReplaceAllString(m[1], "")))
}

var (
	tagRE  = regexp.MustCompile(`<[^>]*>`)
	rowRE  = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	cellRE = regexp.MustCompile(`(?s)<td class="([^"]*)">(.*?)</td>`)
)

// tableRows reads the body rows of the page's table id, each as its
// cells' text by class.
func tableRows(page, id string) []map[string]string {
	m := regexp.MustCompile(`(?s)<table id="` + id + `">.*?<tbody>(.*?)</tbody>`).FindStringSubmatch(page)
	if m == nil {
		return nil
	}
	var rows []map[string]string
	for _, r := range rowRE.FindAllStringSubmatch(m[1], -1) {
		row := map[string]string{}
		for _, c := range cellRE.FindAllStringSubmatch(r[1], -1) {
			row[c[1]] = html.UnescapeString(strings.TrimSpace(tagRE.ReplaceAllString(c[2], "")))
		}
		rows = append(rows, row)
	}
	return rows
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

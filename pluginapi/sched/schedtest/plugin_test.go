package schedtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
)

// TestMain lets this test binary be a scheduler plugin: started by
// RunPlugin (go-plugin's cookie in its environment), it serves the test
// policy prio with the flaw SCHEDTEST_FLAW names, so that the kit's
// plugin mode is tested on a real plugin process.
func TestMain(m *testing.M) {
	if os.Getenv(base.Handshake.MagicCookieKey) == base.Handshake.MagicCookieValue {
		fl := flawByName(os.Getenv("SCHEDTEST_FLAW"))
		sched.ServePolicy(base.Info{Name: "prio", Version: "test"}, func() sched.Policy { return &prio{flaw: fl} })
		return
	}
	os.Exit(m.Run())
}

func flawByName(name string) flaw {
	for k, v := range flawNames {
		if v.name == name {
			return k
		}
	}
	return none
}

// TestPluginCorrectPasses: a correct policy passes through a plugin
// process, with a config block checked against its (empty) schema.
func TestPluginCorrectPasses(t *testing.T) {
	RunPlugin(t, os.Args[0], base.Config{}, HonoursPriorities(), Tasks(1000))
}

// TestPluginFlawsCaught runs RunPlugin on the broken policies that break
// the contract through the rings, each in a child process as
// TestFlawsCaught does, and checks it failed for the right reason.
func TestPluginFlawsCaught(t *testing.T) {
	if f := os.Getenv("SCHEDTEST_PLUGIN_FLAW"); f != "" {
		t.Setenv("SCHEDTEST_FLAW", f) // for the plugin processes it starts
		RunPlugin(t, os.Args[0], nil, HonoursPriorities(), Timeout(3*time.Second), Tasks(500), Seed(1))
		return
	}
	for _, f := range []flaw{duplicates, anyArch, ignorePriorities, hoard, badImpl} {
		f := flawNames[f]
		t.Run(f.name, func(t *testing.T) {
			// The two scenarios that catch these flaws: a hoarded task
			// times out in each, so the others would only add time.
			cmd := exec.Command(os.Args[0], "-test.run", "^TestPluginFlawsCaught$/^(ExactlyOnceOnCapableWorkers|Priorities)$", "-test.count=1")
			cmd.Env = append(os.Environ(), "SCHEDTEST_PLUGIN_FLAW="+f.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the kit passed a plugin that %s:\n%s", f.name, out)
			}
			if !strings.Contains(string(out), f.want) {
				t.Fatalf("the kit failed a plugin that %s, but not with %q:\n%s", f.name, f.want, out)
			}
		})
	}
}

// TestPluginBadConfig: a config block the plugin's schema refuses fails
// the run, naming the attribute.
func TestPluginBadConfig(t *testing.T) {
	if os.Getenv("SCHEDTEST_PLUGIN_BADCONFIG") != "" {
		RunPlugin(t, os.Args[0], base.Config{"speed": int64(3)}, Timeout(3*time.Second))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestPluginBadConfig$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SCHEDTEST_PLUGIN_BADCONFIG=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown attribute "speed"`) {
		t.Fatalf("a config block with an unknown attribute: %v\n%s", err, out)
	}
}

package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// version is the tool's version. A release build sets it at link time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/starpu
//
// Left empty, toolVersion reads it from the build information instead.
var version = ""

// versionCmd prints what a bug report needs to say which build it is about:
// the tool's version, the Go release that built it, and the plugin API and
// shared-memory arena versions the runtime speaks, which a plugin built
// elsewhere must speak too.
func versionCmd(args []string, out io.Writer) error {
	c := newCmd("version", "", "Print the tool's version, the Go release that built it, and the versions of the\nplugin protocol the runtime speaks (a plugin speaking another one is refused).")
	c.refuse("it starts no runtime", "config", "plugin-dir", "sched", "ncpu", "trace")
	if err := c.parse(args, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "starpu %s\n", toolVersion())
	fmt.Fprintf(out, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(out, "plugin API version: %d\n", base.APIVersion)
	fmt.Fprintf(out, "shared-memory arena version: %d\n", shm.ArenaVersion)
	return nil
}

// toolVersion is the version starpu version prints: the one set at link
// time, else what the build information holds.
func toolVersion() string {
	if version != "" {
		return version
	}
	bi, _ := debug.ReadBuildInfo()
	return buildVersion(bi)
}

// buildVersion derives a version from the build information: the main
// module's version when the go command knows it (go install of a tagged
// release, or a build in a tagged checkout), else "devel" with the VCS
// revision the binary was built from, if it was recorded. It is never
// empty, so that a report always says something.
func buildVersion(bi *debug.BuildInfo) string {
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		return "devel (rev " + rev + ", modified)"
	}
	return "devel (rev " + rev + ")"
}

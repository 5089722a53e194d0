// Command driver-fake is a test driver plugin serving plugintest.Driver. Its
// plugin name is its file name after "driver-": the tests copy it under
// other names. Named "driver-crash" it exits with status 3 before serving;
// named "driver-badfactory" its factory fails.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/internal/loader/plugintest"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

func main() {
	name := plugintest.NameFromArgs()
	if name == "crash" {
		fmt.Fprintln(os.Stderr, "driver-crash: crashing on purpose")
		os.Exit(3)
	}
	driver.Serve(func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
		if name == "badfactory" {
			return nil, errors.New("no device found")
		}
		log.Info("fake driver started", "name", name, "arena_bytes", a.Size())
		return plugintest.NewDriver(name, a), nil
	})
}

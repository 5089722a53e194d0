// Command iface-fake is a test data interface plugin serving
// plugintest.Iface on the core's arena. Its plugin name is its file name
// after "iface-".
package main

import (
	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/internal/loader/plugintest"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

func main() {
	name := plugintest.NameFromArgs()
	iface.Serve(func(a *shm.Arena, _ hclog.Logger) (iface.Interface, error) {
		return plugintest.NewIface(name, a), nil
	})
}

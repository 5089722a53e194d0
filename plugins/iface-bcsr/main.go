// Command iface-bcsr is the BCSR sparse matrix data interface plugin
// (StarPU's starpu_bcsr_interface with its vertical block filter, "rows").
// Applications build its metadata and parts with package bcsr.
package main

import (
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsriface"
)

func main() { ifacesdk.Serve(bcsriface.Spec()) }

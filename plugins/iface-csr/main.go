// Command iface-csr is the CSR sparse matrix data interface plugin (StarPU's
// starpu_csr_interface with its vertical block filter, "rows"). Applications
// build its metadata and parts with package csr.
package main

import (
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/plugins/iface-csr/csriface"
)

func main() { ifacesdk.Serve(csriface.Spec()) }

// Command iface-coo is the COO sparse matrix data interface plugin (StarPU's
// starpu_coo_interface). Applications build its metadata and parts with
// package coo; package cooiface is the interface it serves.
package main

import (
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/plugins/iface-coo/cooiface"
)

func main() { ifacesdk.Serve(cooiface.Spec()) }

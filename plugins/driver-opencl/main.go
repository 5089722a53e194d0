// Command driver-opencl is the OpenCL driver plugin: it runs tasks on
// OpenCL devices through the system's ICD loader (pocl gives a CPU device
// on any machine), with a built-in BLAS kernel library and kernels loaded
// from source.
package main

import "github.com/starpu-go/starpu/plugins/driver-opencl/cldriver"

func main() { cldriver.Serve() }

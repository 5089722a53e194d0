// Command driver-cpu is the CPU driver plugin with the BLAS kernel library.
package main

import (
	"github.com/starpu-go/starpu/plugins/driver-cpu/blas"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

func main() {
	cpudriver.Serve(
		cpudriver.WithKernels(kernels.Library()...),
		// One BLAS thread per worker: the workers are the parallelism.
		cpudriver.WithSetup(func() { blas.SetNumThreads(1) }),
	)
}

// Command driver-cuda is the CUDA driver plugin: it runs tasks on NVIDIA
// GPUs through the CUDA driver API, cuBLAS, cuSOLVER and NVRTC, all loaded
// at run time, so that it builds everywhere and, on a machine without a
// GPU, reports why it has no worker.
package main

import "github.com/starpu-go/starpu/plugins/driver-cuda/cudadriver"

func main() { cudadriver.Serve() }

// Command iface-crashy is a test interface plugin that crashes: its Display
// panics, which kills the process (gRPC does not recover handler panics).
package main

import "github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"

func main() {
	ifacesdk.Serve(ifacesdk.Spec{
		Name:    "crashy",
		Shape:   func([]byte) (ifacesdk.Shape, error) { return ifacesdk.Shape{Parts: []uint64{8}}, nil },
		Display: func([]byte) string { panic("iface-crashy: Display crashes on purpose") },
	})
}

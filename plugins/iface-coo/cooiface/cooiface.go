// Package cooiface is the iface-coo plugin's interface: StarPU's COO format
// (package coo) as an ifacesdk.Spec, the whole of it built with the SDK: a
// shape, a contents check, and the SDK's copy plan, pack/unpack, compare,
// display and footprints.
package cooiface

import (
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/plugins/iface-coo/coo"
)

// Spec is the COO interface. It has no filters.
func Spec() ifacesdk.Spec {
	return ifacesdk.Spec{
		Name:      coo.Name,
		Version:   "1",
		PartNames: coo.PartNames,
		Shape: func(meta []byte) (ifacesdk.Shape, error) {
			m, err := coo.Decode(meta)
			return ifacesdk.Shape{Parts: m.PartSizes(), Layout: m.Layout()}, err
		},
		Validate: func(meta []byte, parts [][]byte) error {
			m, _ := coo.Decode(meta) // Shape has checked it
			return coo.Validate(m, parts[coo.PartRows], parts[coo.PartCols], parts[coo.PartValues])
		},
		Display: func(meta []byte) string {
			m, _ := coo.Decode(meta)
			return m.String()
		},
	}
}

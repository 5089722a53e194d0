// Package cooiface is the iface-coo plugin's interface: StarPU's COO format
// (package coo) as an ifacesdk.Spec, the whole of it built with the SDK: a
// shape, a contents check, the entries filter, and the SDK's copy plan,
// pack/unpack, compare, display and footprints.
package cooiface

import (
	"fmt"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/plugins/iface-coo/coo"
)

// Spec is the COO interface.
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
		Filters: map[string]ifacesdk.Filter{coo.EntriesFilter: entries},
	}
}

// entries is the entry-range filter: child i holds the parent's entries
// coo.Chunk(nnz, nparts, i), one range of each part, in a matrix of the
// parent's size. It reads no entry, so it needs no order of them.
func entries(meta []byte, _ [][]byte, nparts int) ([]ifacesdk.FilterChild, error) {
	m, err := coo.Decode(meta)
	if err != nil {
		return nil, err
	}
	if uint64(nparts) > uint64(m.NNZ) {
		return nil, fmt.Errorf("cannot split %d entries into %d parts", m.NNZ, nparts)
	}
	children := make([]ifacesdk.FilterChild, nparts)
	for i := range children {
		lo, hi := coo.Chunk(int(m.NNZ), nparts, i)
		cm := m
		cm.NNZ = uint32(hi - lo)
		first, n, es := uint64(lo), uint64(hi-lo), uint64(m.ElemSize)
		children[i] = ifacesdk.FilterChild{Meta: cm.Encode(), Ranges: []iface.PartRange{
			{Part: coo.PartRows, Offset: first * 4, ChildPart: coo.PartRows, Len: n * 4},
			{Part: coo.PartCols, Offset: first * 4, ChildPart: coo.PartCols, Len: n * 4},
			{Part: coo.PartValues, Offset: first * es, ChildPart: coo.PartValues, Len: n * es},
		}}
	}
	return children, nil
}

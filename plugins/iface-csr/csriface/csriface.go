// Package csriface is the iface-csr plugin's interface: StarPU's CSR format
// (package csr) as an ifacesdk.Spec, with registration checks and the rows
// filter.
package csriface

import (
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
	"github.com/starpu-go/starpu/plugins/internal/sparse"
)

// Spec is the CSR interface. Footprints and Compare look at nnz, nrow and
// elemsize, as StarPU's do: firstentry only places a row block, so blocks
// of equal shape share performance models.
func Spec() ifacesdk.Spec {
	return ifacesdk.Spec{
		Name:      csr.Name,
		Version:   "1",
		PartNames: csr.PartNames,
		Shape: func(meta []byte) (ifacesdk.Shape, error) {
			m, err := csr.Decode(meta)
			if err != nil {
				return ifacesdk.Shape{}, err
			}
			return ifacesdk.Shape{Parts: m.PartSizes(), Layout: m.Layout()}, nil
		},
		Validate: func(meta []byte, parts [][]byte) error {
			m, err := csr.Decode(meta)
			if err != nil {
				return err
			}
			return csr.Validate(m, parts[csr.PartNZVal], parts[csr.PartColInd], parts[csr.PartRowPtr], 0)
		},
		Footprint: func(meta []byte) uint32 {
			m, _ := csr.Decode(meta) // Shape has checked it
			return sparse.Footprint(m.NNZ, m.NRow, m.ElemSize)
		},
		Compare: func(a, b []byte) bool {
			ma, _ := csr.Decode(a)
			mb, _ := csr.Decode(b)
			return ma.NNZ == mb.NNZ && ma.NRow == mb.NRow && ma.ElemSize == mb.ElemSize
		},
		Display: func(meta []byte) string {
			m, _ := csr.Decode(meta)
			return m.String()
		},
		Filters: map[string]ifacesdk.Filter{csr.RowsFilter: rows},
	}
}

// rows is StarPU's CSR vertical block filter (sparse.RowsFilter): child i
// holds rows csr.RowBlock(nrow, nparts, i) with the parent's rowptr values.
var rows = sparse.RowsFilter(csr.Decode, func(m csr.Meta, nnz, nrow, firstentry uint32) []byte {
	m.NNZ, m.NRow, m.FirstEntry = nnz, nrow, firstentry
	return m.Encode()
})

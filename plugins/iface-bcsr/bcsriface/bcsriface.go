// Package bcsriface is the iface-bcsr plugin's interface: StarPU's BCSR
// format (package bcsr) as an ifacesdk.Spec, with registration checks and
// the rows filter, both shared with CSR (package sparse).
package bcsriface

import (
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
	"github.com/starpu-go/starpu/plugins/internal/sparse"
)

// Spec is the BCSR interface. Footprints and Compare look at nnz, nrow, r,
// c and elemsize: firstentry only places a block-row range, so ranges of
// equal shape share performance models.
func Spec() ifacesdk.Spec {
	return ifacesdk.Spec{
		Name:      bcsr.Name,
		Version:   "1",
		PartNames: bcsr.PartNames,
		Shape: func(meta []byte) (ifacesdk.Shape, error) {
			m, err := bcsr.Decode(meta)
			if err != nil {
				return ifacesdk.Shape{}, err
			}
			return ifacesdk.Shape{Parts: m.PartSizes(), Layout: m.Layout()}, nil
		},
		Validate: func(meta []byte, parts [][]byte) error {
			m, _ := bcsr.Decode(meta) // Shape has checked it
			return bcsr.Validate(m, parts[bcsr.PartNZVal], parts[bcsr.PartColInd], parts[bcsr.PartRowPtr], 0)
		},
		Footprint: func(meta []byte) uint32 {
			m, _ := bcsr.Decode(meta) // Shape has checked it
			return sparse.Footprint(m.NNZ, m.NRow, m.R, m.C, m.ElemSize)
		},
		Compare: func(a, b []byte) bool {
			ma, _ := bcsr.Decode(a)
			mb, _ := bcsr.Decode(b)
			ma.FirstEntry, mb.FirstEntry = 0, 0
			return ma == mb
		},
		Display: func(meta []byte) string {
			m, _ := bcsr.Decode(meta)
			return m.String()
		},
		Filters: map[string]ifacesdk.Filter{bcsr.RowsFilter: rows},
	}
}

// rows is StarPU's BCSR vertical block filter (sparse.RowsFilter): child i
// holds block rows bcsr.RowBlock(nrow, nparts, i) with the parent's rowptr
// values and block size.
var rows = sparse.RowsFilter(bcsr.Decode, func(m bcsr.Meta, nnz, nrow, firstentry uint32) []byte {
	m.NNZ, m.NRow, m.FirstEntry = nnz, nrow, firstentry
	return m.Encode()
})

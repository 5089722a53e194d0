// Package csriface is the iface-csr plugin's interface: StarPU's CSR format
// (package csr) as an ifacesdk.Spec, with registration checks and the rows
// filter.
package csriface

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/iface/ifacesdk"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
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
			return footprint(m)
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

func footprint(m csr.Meta) uint32 {
	var b [12]byte
	binary.LittleEndian.PutUint32(b[0:], m.NNZ)
	binary.LittleEndian.PutUint32(b[4:], m.NRow)
	binary.LittleEndian.PutUint32(b[8:], m.ElemSize)
	return crc32.ChecksumIEEE(b[:])
}

// rows is StarPU's CSR vertical block filter: child i holds rows
// csr.RowBlock(nrow, nparts, i), its nnz is the rowptr difference across
// them, its firstentry the parent's rowptr at its first row, and its rowptr
// the parent's nrow+1 entries unchanged (global, as in StarPU).
func rows(meta []byte, parts [][]byte, nparts int) ([]ifacesdk.FilterChild, error) {
	m, err := csr.Decode(meta)
	if err != nil {
		return nil, err
	}
	if uint64(nparts) > uint64(m.NRow) {
		return nil, fmt.Errorf("cannot split %d rows into %d blocks", m.NRow, nparts)
	}
	rowptr := parts[csr.PartRowPtr]
	at := func(r int) (uint32, error) {
		v := binary.LittleEndian.Uint32(rowptr[4*r:])
		if v < m.FirstEntry || v-m.FirstEntry > m.NNZ {
			return 0, fmt.Errorf("rowptr[%d] = %d outside [firstentry %d, firstentry+nnz %d]", r, v, m.FirstEntry, m.FirstEntry+m.NNZ)
		}
		return v, nil
	}
	es := uint64(m.ElemSize)
	children := make([]ifacesdk.FilterChild, nparts)
	for i := range children {
		lo, hi := csr.RowBlock(int(m.NRow), nparts, i)
		a, err := at(lo)
		if err != nil {
			return nil, err
		}
		b, err := at(hi)
		if err != nil {
			return nil, err
		}
		if b < a {
			return nil, fmt.Errorf("rowptr[%d] = %d < rowptr[%d] = %d: rowptr must not decrease", hi, b, lo, a)
		}
		cm := csr.Meta{NNZ: b - a, NRow: uint32(hi - lo), FirstEntry: a, ElemSize: m.ElemSize}
		first, n := uint64(a-m.FirstEntry), uint64(b-a)
		var rs []iface.PartRange
		if n > 0 {
			rs = append(rs,
				iface.PartRange{Part: csr.PartNZVal, Offset: first * es, ChildPart: csr.PartNZVal, Len: n * es},
				iface.PartRange{Part: csr.PartColInd, Offset: first * 4, ChildPart: csr.PartColInd, Len: n * 4})
		}
		rs = append(rs, iface.PartRange{Part: csr.PartRowPtr, Offset: uint64(lo) * 4, ChildPart: csr.PartRowPtr, Len: uint64(hi-lo+1) * 4})
		children[i] = ifacesdk.FilterChild{Meta: cm.Encode(), Ranges: rs}
	}
	return children, nil
}

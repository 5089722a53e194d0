package csriface

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// FuzzCSR feeds arbitrary metadata and row pointers, as an application
// registering a matrix can, to everything of the interface that reads
// them: csr.Decode, csr.Validate, the rows filter and a kernel's csr.View
// and Row. None may panic; a matrix Validate accepts splits into children
// that hold exactly its entries, within its parts.
func FuzzCSR(f *testing.F) {
	meta := func(nnz, nrow, fe, es uint32) []byte {
		return csr.Meta{NNZ: nnz, NRow: nrow, FirstEntry: fe, ElemSize: es}.Encode()
	}
	rowptr := func(v ...uint32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], x)
		}
		return b
	}
	f.Add(meta(5, 3, 0, 8), rowptr(0, 2, 4, 5), []byte{0, 1, 2, 0, 1}, uint16(2))
	f.Add(meta(5, 3, 10, 4), rowptr(10, 12, 14, 15), []byte{}, uint16(3))
	f.Add(meta(5, 3, 0, 8), rowptr(0, 4, 2, 5), []byte{}, uint16(1))
	f.Add(meta(0, 0, 0, 8), rowptr(0), []byte{}, uint16(1))
	f.Add(meta(1, 0xfffffffe, 0xffffffff, 8), rowptr(0), []byte{}, uint16(7))
	f.Add([]byte{1, 2, 3}, []byte{}, []byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, metaBytes, rp, cols []byte, nparts uint16) {
		m, err := csr.Decode(metaBytes)
		if err != nil {
			return
		}
		// Keep the parts small: the sizes come from the metadata.
		if m.NNZ > 1<<12 || m.NRow > 1<<12 || m.ElemSize > 64 {
			return
		}
		sizes := m.PartSizes()
		offs, total := iface.PartOffsets(sizes)
		region := make([]uint64, (total+7)/8) // 8-byte aligned, as the arena is
		all := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(region))), len(region)*8)[:total]
		parts := make([][]byte, csr.NumParts)
		for i := range parts {
			parts[i] = all[offs[i] : offs[i]+sizes[i]]
		}
		copy(parts[csr.PartRowPtr], rp)
		copy(parts[csr.PartColInd], cols)
		valid := csr.Validate(m, parts[csr.PartNZVal], parts[csr.PartColInd], parts[csr.PartRowPtr], 0) == nil

		if nparts > 0 {
			children, err := rows(metaBytes, parts, int(nparts))
			if valid && uint64(nparts) <= uint64(m.NRow) && err != nil {
				t.Fatalf("valid %v in %d parts: %v", m, nparts, err)
			}
			var nnz uint64
			for i, c := range children {
				cm, err := csr.Decode(c.Meta)
				if err != nil {
					t.Fatalf("child %d: %v", i, err)
				}
				nnz += uint64(cm.NNZ)
				for _, r := range c.Ranges {
					if r.Part < 0 || r.Part >= csr.NumParts || r.Offset+r.Len > sizes[r.Part] {
						t.Fatalf("child %d: range %+v outside part sizes %v", i, r, sizes)
					}
				}
			}
			// (Without Validate, rowptr may end anywhere: the filter only
			// keeps each child within the parts.)
			if valid && err == nil && nnz != uint64(m.NNZ) {
				t.Fatalf("children hold %d entries, the matrix %d", nnz, m.NNZ)
			}
		}

		buf := &kernel.Buffer{Layout: m.Layout(), Bytes: all}
		buf.Interface = kernel.FirstPluginInterface
		view, err := csr.View[float32](buf)
		if m.ElemSize != 4 {
			if err == nil {
				t.Fatalf("a %d-byte CSR matrix viewed as float32", m.ElemSize)
			}
			return
		}
		if err != nil {
			t.Fatalf("View: %v", err)
		}
		for r := 0; r < int(m.NRow); r++ {
			lo, hi, err := view.Row(r)
			if err != nil {
				if valid {
					t.Fatalf("row %d of a valid matrix: %v", r, err)
				}
				continue
			}
			_ = view.NZVal[lo:hi]
			_ = view.ColInd[lo:hi]
		}
	})
}

package bcsriface

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/iface-bcsr/bcsr"
)

// FuzzBCSR feeds arbitrary metadata, row pointers and block columns, as an
// application registering a matrix can, to everything of the interface
// that reads them: bcsr.Decode, bcsr.Validate, the rows filter and a
// kernel's bcsr.View, Row and Block. None may panic; a matrix Validate
// accepts splits into children that hold exactly its blocks, within its
// parts.
func FuzzBCSR(f *testing.F) {
	meta := func(nnz, nrow, fe, r, c uint32) []byte {
		return bcsr.Meta{NNZ: nnz, NRow: nrow, FirstEntry: fe, R: r, C: c, ElemSize: 4}.Encode()
	}
	u32 := func(v ...uint32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], x)
		}
		return b
	}
	f.Add(meta(3, 2, 0, 2, 2), u32(0, 1, 3), u32(0, 0, 1), uint16(2))
	f.Add(meta(3, 2, 5, 3, 1), u32(5, 6, 8), u32(4, 0, 1), uint16(1))
	f.Add(meta(3, 2, 0, 2, 2), u32(0, 3, 1), u32(), uint16(2))
	f.Add(meta(0, 0, 0, 1, 1), u32(0), u32(), uint16(1))
	f.Add(meta(1, 0xfffffffe, 0xffffffff, 1, 1), u32(0), u32(), uint16(7))
	f.Add(meta(1, 1, 0, 0, 1), u32(0, 1), u32(0), uint16(1))
	f.Add([]byte{1, 2, 3}, []byte{}, []byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, metaBytes, rp, cols []byte, nparts uint16) {
		m, err := bcsr.Decode(metaBytes)
		if err != nil {
			return
		}
		// Keep the parts small: the sizes come from the metadata.
		if m.NNZ > 1<<10 || m.NRow > 1<<10 || m.R*m.C > 64 || m.ElemSize > 16 {
			return
		}
		sizes := m.PartSizes()
		offs, total := iface.PartOffsets(sizes)
		region := make([]uint64, (total+7)/8) // 8-byte aligned, as the arena is
		all := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(region))), len(region)*8)[:total]
		parts := make([][]byte, bcsr.NumParts)
		for i := range parts {
			parts[i] = all[offs[i] : offs[i]+sizes[i]]
		}
		copy(parts[bcsr.PartRowPtr], rp)
		copy(parts[bcsr.PartColInd], cols)
		valid := bcsr.Validate(m, parts[bcsr.PartNZVal], parts[bcsr.PartColInd], parts[bcsr.PartRowPtr], 0) == nil

		if nparts > 0 {
			children, err := rows(metaBytes, parts, int(nparts))
			if valid && uint64(nparts) <= uint64(m.NRow) && err != nil {
				t.Fatalf("valid %v in %d parts: %v", m, nparts, err)
			}
			var nnz uint64
			for i, c := range children {
				cm, err := bcsr.Decode(c.Meta)
				if err != nil || cm.R != m.R || cm.C != m.C {
					t.Fatalf("child %d: %v, %v", i, cm, err)
				}
				nnz += uint64(cm.NNZ)
				for _, r := range c.Ranges {
					if r.Part < 0 || r.Part >= bcsr.NumParts || r.Offset+r.Len > sizes[r.Part] {
						t.Fatalf("child %d: range %+v outside part sizes %v", i, r, sizes)
					}
				}
			}
			if valid && err == nil && nnz != uint64(m.NNZ) {
				t.Fatalf("children hold %d blocks, the matrix %d", nnz, m.NNZ)
			}
		}

		buf := &kernel.Buffer{Layout: m.Layout(), Bytes: all}
		buf.Interface = kernel.FirstPluginInterface
		view, err := bcsr.View[float32](buf)
		if m.ElemSize != 4 {
			if err == nil {
				t.Fatalf("a %d-byte BCSR matrix viewed as float32", m.ElemSize)
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
					t.Fatalf("block row %d of a valid matrix: %v", r, err)
				}
				continue
			}
			for k := lo; k < hi; k++ {
				_ = view.Block(k)
				_ = view.ColInd[k]
			}
		}
	})
}

package mpi_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/core/mpi"
	"github.com/starpu-go/starpu/internal/mpirun"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/plugins/iface-csr/csr"
)

// TestRanksCSR runs rankCSR on 2 ranks, with the iface-csr plugin built
// for them.
func TestRanksCSR(t *testing.T) {
	exe := rankExe(t)
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "iface-csr"), "../../plugins/iface-csr").CombinedOutput(); err != nil {
		t.Fatalf("build iface-csr: %v\n%s", err, out)
	}
	res, err := mpirun.Run(context.Background(), mpirun.Job{NP: 2, Prog: exe, Args: []string{"-test.run=^$"}, Body: "csr",
		Env: []string{config.EnvPluginDir + "=" + dir}, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("%v\n%s", err, res.Output)
	}
}

// rankCSR: matrices of the CSR interface plugin go between ranks like any
// handle. Rank 0's A goes to rank 1, rank 1's B (its rowptr offset by a
// firstentry, as a row block's) to rank 0, each into a handle of its
// shape registered there without the data (RegisterSame), so that every
// part, structure included, comes by MPI; y = A x on rank 1 and z = B x
// on rank 0 use them, and the matrices received pack as the owners'.
func rankCSR() error {
	return run(mpi.Options{}, func(n *node) error {
		c, rt := n.c, n.rt
		me := c.Rank()
		if c.Size() != 2 {
			return fmt.Errorf("csr: %d ranks, want 2", c.Size())
		}
		type matrix struct {
			val    []float64
			col    []uint32
			row    []uint32
			owner  int
			tag    int64
			packed []byte // what Pack gives on the owner: the parts in order
			h      *core.Handle
		}
		mats := []*matrix{
			{val: []float64{1, 2, 3, 4, 5, 6, 7, 8}, col: []uint32{0, 1, 1, 2, 2, 3, 3, 0}, row: []uint32{0, 2, 4, 6, 8}, owner: 0, tag: 1},
			{val: []float64{-1, 2, -3}, col: []uint32{3, 0, 2}, row: []uint32{5, 7, 8}, owner: 1, tag: 2},
		}
		for _, m := range mats {
			meta, parts, err := csr.Parts(m.val, m.col, m.row, m.row[0])
			if err != nil {
				return err
			}
			m.packed = bytes.Join(parts, nil)
			h, err := rt.RegisterInterface(csr.Name, meta.Encode(), parts)
			if err != nil {
				return err
			}
			if me != m.owner {
				// A handle of the shape, zeroed: what arrives fills it.
				same, err := h.RegisterSame()
				if err != nil {
					return err
				}
				if err := h.Unregister(); err != nil {
					return err
				}
				h = same
			}
			m.h = h
			if err := c.Register(h, m.tag, m.owner); err != nil {
				return err
			}
		}
		xs := []float64{1, 2, 3, 4}
		x, err := newVec(n, 3, 1, len(xs), func(i int) float64 { return xs[i] })
		if err != nil {
			return err
		}
		products := make([]vec, len(mats))
		want := make([][]float64, len(mats))
		spmv := &core.Codelet{Name: "spmv", Kernels: map[driver.Arch]string{driver.CPU: csr.SpmvF64}, Modes: []core.Mode{core.R, core.R, core.W}}
		for k, m := range mats {
			rows := len(m.row) - 1
			want[k] = make([]float64, rows)
			for i := range rows {
				for e := m.row[i] - m.row[0]; e < m.row[i+1]-m.row[0]; e++ {
					want[k][i] += m.val[e] * xs[m.col[e]]
				}
			}
			// The product lives on the other rank, which runs the task.
			if products[k], err = newVec(n, int64(4+k), 1-m.owner, rows, func(int) float64 { return 0 }); err != nil {
				return err
			}
			if _, err := c.Insert(spmv, core.Data(core.R, m.h), core.Data(core.R, x.h), core.Data(core.W, products[k].h)); err != nil {
				return err
			}
		}
		if err := c.WaitForAll(); err != nil {
			return err
		}
		for k, m := range mats {
			if me == m.owner {
				continue
			}
			if err := products[k].check(fmt.Sprintf("product %d", k), want[k]); err != nil {
				return err
			}
			got, err := m.h.Pack()
			if err != nil {
				return err
			}
			if !bytes.Equal(got, m.packed) {
				return fmt.Errorf("matrix %d received from rank %d packs as %x, want %x", k, m.owner, got, m.packed)
			}
		}
		for _, h := range []*core.Handle{mats[0].h, mats[1].h, x.h, products[0].h, products[1].h} {
			if err := c.Unregister(h); err != nil {
				return err
			}
		}
		return nil
	})
}

package mpi_test

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/mpi"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/blasarg"
)

var (
	// sumInto: s += x, s in REDUX.
	sumInto = &core.Codelet{Name: "sum-into", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AddF64}, Modes: []core.Mode{core.Redux, core.R}}
	// dotInto: r += x.y, r in REDUX.
	dotInto = &core.Codelet{Name: "dot-into", Kernels: map[driver.Arch]string{driver.CPU: "test_dot_acc_f64"}, Modes: []core.Mode{core.R, core.R, core.Redux}}
	// The reduction methods of a sum.
	addF64  = &core.Codelet{Name: "add", Kernels: map[driver.Arch]string{driver.CPU: blasarg.AddF64}, Modes: []core.Mode{core.RW, core.R}}
	zeroF64 = &core.Codelet{Name: "zero", Kernels: map[driver.Arch]string{driver.CPU: blasarg.Zero}, Modes: []core.Mode{core.W}}
)

// vec is a vector datum of every rank: its handle, and on its owner the
// Go memory it was registered from.
type vec struct {
	h   *core.Handle
	mem []float64
}

// newVec registers a vector of n float64 with tag and owner, filled by
// init on the owner, a placeholder elsewhere.
func newVec(n *node, tag int64, owner, size int, init func(i int) float64) (vec, error) {
	var v vec
	var err error
	if n.c.Rank() == owner {
		v.mem = make([]float64, size)
		for i := range v.mem {
			v.mem[i] = init(i)
		}
		v.h, err = core.RegisterVector(n.rt, v.mem)
	} else {
		v.h, err = n.rt.RegisterNoHome(kernel.Layout{Interface: kernel.Vector, ElemSize: 8, NX: uint64(size)})
	}
	if err != nil {
		return v, err
	}
	return v, n.c.Register(v.h, tag, owner)
}

// check compares v's value on this rank with want.
func (v vec) check(what string, want []float64) error {
	if err := v.h.Acquire(core.R); err != nil {
		return err
	}
	defer v.h.Release()
	got := v.mem
	if got == nil {
		got = unsafe.Slice((*float64)(v.h.LocalPointer()), len(want))
	}
	for i := range want {
		if !eq(got[i], want[i]) {
			return fmt.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
	return nil
}

// rankRedux: sums and a dot product accumulated in REDUX over the ranks
// (two workers each), reduced by Redux, by a task that reads the datum
// and by Unregister, each checked against the serial computation; the
// messages show that each rank that contributed sent one contribution;
// bad input is an error on every rank.
func rankRedux() error {
	n, err := startN(mpi.Options{}, 2)
	if err != nil {
		return err
	}
	return n.stop(reduxBody(n))
}

func reduxBody(n *node) error {
	c := n.c
	me, np := c.Rank(), c.Size()
	const K, L = 12, 32
	xval := func(k int) func(int) float64 {
		return func(i int) float64 { return float64(k) + float64(i)/10 }
	}
	yval := func(k int) func(int) float64 {
		return func(i int) float64 { return 1 + float64(k*i)/100 }
	}
	xs, ys := make([]vec, K), make([]vec, K)
	for k := range K {
		var err error
		if xs[k], err = newVec(n, int64(k), k%np, L, xval(k)); err != nil {
			return err
		}
		if ys[k], err = newVec(n, int64(100+k), k%np, L, yval(k)); err != nil {
			return err
		}
	}
	sOwner, dotOwner := 1%np, np-1
	s, err := newVec(n, 200, sOwner, L, func(i int) float64 { return float64(i) })
	if err != nil {
		return err
	}
	dot, err := newVec(n, 201, dotOwner, 1, func(int) float64 { return 0.5 })
	if err != nil {
		return err
	}
	for _, h := range []*core.Handle{s.h, dot.h} {
		if err := h.SetReductionMethods(addF64, zeroF64); err != nil {
			return err
		}
	}
	sRef := make([]float64, L)
	for i := range sRef {
		sRef[i] = float64(i)
	}
	dotRef := 0.5

	// Bad input, refused alike on every rank before anything is sent.
	unreg, err := n.rt.RegisterNoHome(kernel.Layout{Interface: kernel.Vector, ElemSize: 8, NX: L})
	if err != nil {
		return err
	}
	noMethods, err := newVec(n, 300, 0, L, func(int) float64 { return 0 })
	if err != nil {
		return err
	}
	bad := []struct {
		what string
		err  error
		want error
	}{
		{"Redux of an unregistered handle", c.Redux(unreg), mpi.ErrNotRegistered},
		{"Redux of a handle without reduction methods", c.Redux(noMethods.h), mpi.ErrNoReductionMethods},
		{"Insert with REDUX to a handle without reduction methods", second(c.Insert(sumInto, core.Data(core.Redux, noMethods.h), core.Data(core.R, xs[0].h))), mpi.ErrNoReductionMethods},
		{"Redux of nil", c.Redux(nil), nil},
	}
	for _, tc := range bad {
		if tc.err == nil || (tc.want != nil && !errors.Is(tc.err, tc.want)) {
			return fmt.Errorf("%s: %v, want %v", tc.what, tc.err, tc.want)
		}
	}

	// Phase 1: s += x_k where x_k lives, and once on rank 0 (InsertOn),
	// then Redux.
	before := c.Stats()
	for k := range K {
		if _, err := c.Insert(sumInto, core.Data(core.Redux, s.h), core.Data(core.R, xs[k].h)); err != nil {
			return err
		}
		for i := range sRef {
			sRef[i] += xval(k)(i)
		}
	}
	if _, err := c.InsertOn(0, sumInto, core.Data(core.Redux, s.h), core.Data(core.R, xs[K-1].h)); err != nil {
		return err
	}
	for i := range sRef {
		sRef[i] += xval(K - 1)(i)
	}
	if err := c.Redux(s.h); err != nil {
		return err
	}
	if err := c.WaitForAll(); err != nil {
		return err
	}
	if me == sOwner {
		// Every other rank contributed, and sent its contribution once.
		after := c.Stats()
		for r := range np {
			if d := after[r].ReceivedMsgs - before[r].ReceivedMsgs; r != sOwner && d != 1 {
				return fmt.Errorf("the owner of s received %d messages from rank %d during the reduction, want its one contribution", d, r)
			}
		}
	}
	// A second Redux with nothing pending sends nothing.
	mid := c.Stats()
	if err := c.Redux(s.h); err != nil {
		return err
	}
	if err := c.WaitForAll(); err != nil {
		return err
	}
	for r, p := range c.Stats() {
		if p.SentMsgs != mid[r].SentMsgs {
			return fmt.Errorf("a Redux with no contribution pending sent %d messages to rank %d", p.SentMsgs-mid[r].SentMsgs, r)
		}
	}
	if err := c.GetDataOnNode(s.h, 0); err != nil {
		return err
	}
	if me == 0 {
		if err := s.check("s after Redux", sRef); err != nil {
			return err
		}
	}

	// Phase 2: the dot product x.y block by block where the blocks live;
	// a task scaling it on its owner reduces it first.
	for k := range K {
		if _, err := c.Insert(dotInto, core.Data(core.R, xs[k].h), core.Data(core.R, ys[k].h), core.Data(core.Redux, dot.h)); err != nil {
			return err
		}
		for i := range L {
			dotRef += xval(k)(i) * yval(k)(i)
		}
	}
	if _, err := c.Insert(scalF64, core.Data(core.RW, dot.h), core.ClArgs(blasarg.ScalArg{Alpha: 2}.Encode())); err != nil {
		return err
	}
	dotRef *= 2
	if err := c.GetDataOnNode(dot.h, 0); err != nil {
		return err
	}
	if err := c.WaitForAll(); err != nil {
		return err
	}
	if me == 0 {
		if err := dot.check("2 x.y", []float64{dotRef}); err != nil {
			return err
		}
	}

	// Phase 3: s += y_k, still pending when s is unregistered: Unregister
	// reduces it, and the owner's memory holds the sum.
	for k := range K {
		if _, err := c.Insert(sumInto, core.Data(core.Redux, s.h), core.Data(core.R, ys[k].h)); err != nil {
			return err
		}
		for i := range sRef {
			sRef[i] += yval(k)(i)
		}
	}
	if err := c.Unregister(s.h); err != nil {
		return err
	}
	if me == sOwner {
		for i, v := range s.mem {
			if !eq(v, sRef[i]) {
				return fmt.Errorf("s after Unregister: [%d] = %v, want %v", i, v, sRef[i])
			}
		}
	}
	for _, v := range append(append([]vec{dot, noMethods}, xs...), ys...) {
		if err := c.Unregister(v.h); err != nil {
			return err
		}
	}
	return errors.Join(unreg.Unregister(), c.WaitForAll())
}

func second[T any](_ T, err error) error { return err }

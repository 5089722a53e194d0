package plugintest

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Target is the plugin a suite runs against.
type Target struct {
	// Name is the plugin's name (without the kind).
	Name string
	// Remote is set when the plugin is reached over gRPC: its errors must
	// then read "plugin <kind>-<name>: <the fake's message>" and be
	// *base.RemoteError.
	Remote bool
	// Arena is the core's arena, the one the plugin was given.
	Arena *shm.Arena
}

// wantErr checks err is the fake's error msg, as seen through the target
// (exact when prefix is false, else msg is a prefix of the fake's message).
func wantErr(t *testing.T, tg Target, kind base.Kind, err error, msg string, prefix bool) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", msg)
	}
	got := err.Error()
	if tg.Remote {
		label := "plugin " + string(kind) + "-" + tg.Name + ": "
		if !strings.HasPrefix(got, label) {
			t.Fatalf("error %q does not start with %q", got, label)
		}
		var re *base.RemoteError
		if !errors.As(err, &re) {
			t.Fatalf("error %q is a %T, want *base.RemoteError", got, err)
		}
		if re.Message != strings.TrimPrefix(got, label) {
			t.Fatalf("RemoteError.Message %q, error %q", re.Message, got)
		}
		got = strings.TrimPrefix(got, label)
	}
	if prefix && !strings.HasPrefix(got, msg) || !prefix && got != msg {
		t.Fatalf("error %q, want %q", got, msg)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// BaseSuite checks the base.Plugin methods of a fake of kind.
func BaseSuite(t *testing.T, p base.Plugin, kind base.Kind, tg Target) {
	t.Run("PluginInfo", func(t *testing.T) {
		info, err := p.PluginInfo(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		want := &base.Info{Kind: kind, Name: tg.Name, Version: Version, APIVersions: []int{base.APIVersion}}
		if !reflect.DeepEqual(info, want) {
			t.Fatalf("info %+v, want %+v", info, want)
		}
	})
	t.Run("ConfigSchema", func(t *testing.T) {
		s, err := p.ConfigSchema(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*s, Schema) {
			t.Fatalf("schema %+v, want %+v", *s, Schema)
		}
	})
	t.Run("SetConfig", func(t *testing.T) {
		ctx := ctxT(t)
		if err := p.SetConfig(ctx, Config); err != nil {
			t.Fatal(err)
		}
		bad := base.Config{"threads": int64(1), "bogus": int64(1)}
		wantErr(t, tg, kind, p.SetConfig(ctx, bad), `config: unknown attribute "bogus" (accepted: label, threads, ratio, verbose)`, false)
		wrong := base.Config{"threads": "4"}
		wantErr(t, tg, kind, p.SetConfig(ctx, wrong), `config: attribute "threads": want int, got string`, false)
		wantErr(t, tg, kind, p.SetConfig(ctx, base.Config{"threads": int64(5)}), "config: got map[threads:5], want", true)
	})
}

// DriverSuite checks every method of d, a fake Driver (NewDriver) reached
// as tg says, errors included.
func DriverSuite(t *testing.T, d driver.Driver, tg Target) {
	const k = base.KindDriver
	BaseSuite(t, d, k, tg)
	t.Run("Fingerprint", func(t *testing.T) {
		fp, err := d.Fingerprint(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*fp, DriverFingerprint) {
			t.Fatalf("fingerprint %+v, want %+v", *fp, DriverFingerprint)
		}
	})
	t.Run("InitDeinit", func(t *testing.T) {
		ctx := ctxT(t)
		bad := DriverInit
		bad.Workers = append([]driver.WorkerSpec(nil), DriverInit.Workers...)
		bad.Workers[1].Completion.Size++
		wantErr(t, tg, k, d.Init(ctx, &bad), "init: request mismatch: got {Workers:[{ID:3", true)
		wantErr(t, tg, k, d.Init(ctx, &driver.InitRequest{}), "init: request mismatch: got {Workers:[] SpinIters:0}", false)
		wantErr(t, tg, k, d.Deinit(ctx), "deinit: not initialised", false)
		req := DriverInit
		if err := d.Init(ctx, &req); err != nil {
			t.Fatal(err)
		}
		wantErr(t, tg, k, d.Init(ctx, &req), "init: already initialised", false)
		if err := d.Deinit(ctx); err != nil {
			t.Fatal(err)
		}
		wantErr(t, tg, k, d.Deinit(ctx), "deinit: not initialised", false)
	})
	t.Run("LoadKernel", func(t *testing.T) {
		ctx := ctxT(t)
		idx, err := d.LoadKernel(ctx, driver.KernelSource{Name: "scale", Source: "kernel void scale(global float *x) {}"})
		if err != nil {
			t.Fatal(err)
		}
		if want := len(DriverFingerprint.Kernels); idx != want {
			t.Fatalf("LoadKernel index %d, want %d", idx, want)
		}
		_, err = d.LoadKernel(ctx, driver.KernelSource{Name: "scale", Source: "garbage"})
		wantErr(t, tg, k, err, "load kernel scale: build failed:\n<source>:1:1: error: expected 'kernel void scale'", false)
	})
}

// SchedSuite checks every method of s, a fake Scheduler (NewSched) reached
// as tg says, errors included.
func SchedSuite(t *testing.T, s sched.Scheduler, tg Target) {
	const k = base.KindScheduler
	BaseSuite(t, s, k, tg)
	t.Run("InitDeinit", func(t *testing.T) {
		ctx := ctxT(t)
		bad := SchedInit
		bad.Rings.CoreBell++
		wantErr(t, tg, k, s.Init(ctx, &bad), "init: request mismatch: got {Workers:[{ID:0", true)
		wantErr(t, tg, k, s.Init(ctx, &sched.InitRequest{}), "init: request mismatch: got {Workers:[] Rings:{Events:{Offset:0 Size:0}", true)
		wantErr(t, tg, k, s.Deinit(ctx), "deinit: not initialised", false)
		req := SchedInit
		if err := s.Init(ctx, &req); err != nil {
			t.Fatal(err)
		}
		wantErr(t, tg, k, s.Init(ctx, &req), "init: already initialised", false)
		if err := s.Deinit(ctx); err != nil {
			t.Fatal(err)
		}
		wantErr(t, tg, k, s.Deinit(ctx), "deinit: not initialised", false)
	})
}

// IfaceSuite checks every method of i, a fake Interface (NewIface) reached
// as tg says, errors and context deadlines included.
func IfaceSuite(t *testing.T, i iface.Interface, tg Target) {
	const k = base.KindInterface
	BaseSuite(t, i, k, tg)
	meta := []byte("n=100,elem=8")
	t.Run("Describe", func(t *testing.T) {
		ctx := ctxT(t)
		d, err := i.Describe(ctx, meta, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := &iface.Description{Name: "vec", Buffers: []uint64{800}, Size: 800, Footprint: crc32.ChecksumIEEE(meta),
			Layout: kernel.Layout{ElemSize: 8, NX: 100, LD: 800}}
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("description %+v, want %+v", d, want)
		}
		wantErr(t, tg, k, errOf(i.Describe(ctx, []byte("n=x,elem=8"), nil)), `describe: bad metadata field n: "x"`, false)
		wantErr(t, tg, k, errOf(i.Describe(ctx, nil, nil)), `describe: bad metadata "": want n=<count>,elem=<bytes>`, false)
	})
	t.Run("CopyPlan", func(t *testing.T) {
		ctx := ctxT(t)
		plan, err := i.CopyPlan(ctx, meta)
		if err != nil {
			t.Fatal(err)
		}
		want := []iface.Range{{Buffer: 0, Offset: 0, Len: 64}, {Buffer: 0, Offset: 64, Len: 736}}
		if !reflect.DeepEqual(plan, want) {
			t.Fatalf("plan %+v, want %+v", plan, want)
		}
		wantErr(t, tg, k, errOf(i.CopyPlan(ctx, []byte("elem=8,n=1"))), "copy plan: bad metadata field 0: want n", false)
	})
	t.Run("PackUnpack", func(t *testing.T) {
		ctx := ctxT(t)
		a := tg.Arena
		buf, msg, back := mustAlloc(t, a, 800), mustAlloc(t, a, 808), mustAlloc(t, a, 800)
		for j, b := 0, a.Bytes(buf); j < len(b); j++ {
			b[j] = byte(j*13 + 5)
		}
		n, err := i.Pack(ctx, meta, []base.Span{buf}, msg)
		if err != nil {
			t.Fatal(err)
		}
		if n != 808 {
			t.Fatalf("packed %d bytes, want 808", n)
		}
		if !bytes.Equal(a.Bytes(msg)[8:], a.Bytes(buf)) {
			t.Fatal("packed data differs from the buffer")
		}
		if err := i.Unpack(ctx, meta, msg, []base.Span{back}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(back), a.Bytes(buf)) {
			t.Fatal("unpacked data differs from the packed buffer")
		}
		wantErr(t, tg, k, errOf(i.Pack(ctx, meta, []base.Span{buf}, base.Span{Offset: msg.Offset, Size: 10})),
			"pack: destination of 10 bytes, need 808", false)
		wantErr(t, tg, k, errOf(i.Pack(ctx, meta, nil, msg)), "pack: want 1 buffer of 800 bytes, got []", false)
		wantErr(t, tg, k, i.Unpack(ctx, []byte("n=50,elem=16"), msg, []base.Span{back}),
			"unpack: message is n=100,elem=8, metadata n=50,elem=16", false)
	})
	t.Run("Compare", func(t *testing.T) {
		ctx := ctxT(t)
		for _, c := range []struct {
			a, b string
			eq   bool
		}{{"n=1,elem=2", "n=1,elem=2", true}, {"n=1,elem=2", "n=2,elem=1", false}} {
			eq, err := i.Compare(ctx, []byte(c.a), []byte(c.b))
			if err != nil || eq != c.eq {
				t.Fatalf("Compare(%s, %s) = %v, %v; want %v", c.a, c.b, eq, err, c.eq)
			}
		}
		wantErr(t, tg, k, errOf(i.Compare(ctx, meta, []byte("n=0,elem=1"))), `compare: second: bad metadata field n: "0"`, false)
	})
	t.Run("Display", func(t *testing.T) {
		ctx := ctxT(t)
		s, err := i.Display(ctx, meta)
		if err != nil || s != "vec(n=100, elem=8)" {
			t.Fatalf("Display = %q, %v", s, err)
		}
		wantErr(t, tg, k, errOf(i.Display(ctx, []byte("x"))), `display: bad metadata "x": want n=<count>,elem=<bytes>`, false)
	})
	t.Run("Deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := i.Display(ctx, []byte("block"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want one wrapping context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("call returned after %s", d)
		}
	})
}

func errOf[T any](_ T, err error) error { return err }

func mustAlloc(t *testing.T, a *shm.Arena, n uint64) base.Span {
	t.Helper()
	s, err := a.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Free(s) })
	return s
}

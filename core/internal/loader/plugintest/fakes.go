// Package plugintest has fake plugins of every kind and the suites that
// check a plugin's Go interface against them: the same suite runs on a fake
// in process, through go-plugin's in-memory gRPC harness and in a real
// plugin process (the binaries under ../testdata/plugins serve these fakes),
// so that the three are shown to behave the same, errors included.
//
// The fakes check what they are sent against the canonical values of this
// package and answer with canonical values, so a field lost or garbled on
// the wire fails a call.
package plugintest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/iface"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// Version is the version every fake reports.
const Version = "0.1.0-fake"

// Schema is the configuration schema of every fake: one attribute of each
// type.
var Schema = base.Schema{Attrs: []base.Attr{
	{Name: "label", Type: base.AttrString, Default: "x", Doc: "a string"},
	{Name: "threads", Type: base.AttrInt, Default: "1", Required: true, Doc: "an int"},
	{Name: "ratio", Type: base.AttrFloat, Default: "0.5", Doc: "a float"},
	{Name: "verbose", Type: base.AttrBool, Doc: "a bool"},
}}

// Config is the configuration every fake accepts: SetConfig fails for
// anything else.
var Config = base.Config{"label": "fake", "threads": int64(4), "ratio": 0.25, "verbose": true}

// NameFromArgs is a fake plugin binary's name: its file name after the
// "<kind>-" prefix, so that one binary copied under several names plays
// several plugins.
func NameFromArgs() string {
	_, name, _ := strings.Cut(filepath.Base(os.Args[0]), "-")
	return name
}

// fakeBase implements base.Plugin for every fake.
type fakeBase struct {
	kind base.Kind
	name string
}

// PluginInfo implements base.Plugin.
func (f *fakeBase) PluginInfo(context.Context) (*base.Info, error) {
	return &base.Info{Kind: f.kind, Name: f.name, Version: Version, APIVersions: []int{base.APIVersion}}, nil
}

// ConfigSchema implements base.Plugin: Schema.
func (f *fakeBase) ConfigSchema(context.Context) (*base.Schema, error) {
	s := base.Schema{Attrs: append([]base.Attr(nil), Schema.Attrs...)}
	return &s, nil
}

// SetConfig implements base.Plugin: it accepts Config only.
func (f *fakeBase) SetConfig(_ context.Context, cfg base.Config) error {
	if err := Schema.Validate(cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if !reflect.DeepEqual(cfg, Config) {
		return fmt.Errorf("config: got %v, want %v", cfg, Config)
	}
	return nil
}

// DriverFingerprint is what the fake driver reports.
var DriverFingerprint = driver.Fingerprint{
	Arch:    driver.CUDA,
	Units:   []driver.Unit{{Name: "gpu0", Node: 1}, {Name: "gpu1", Node: 2}},
	Nodes:   []driver.MemoryNode{{Name: "gpu0-mem", Bytes: 1 << 34}, {Name: "gpu1-mem", Bytes: 1<<34 + 1}},
	Kernels: []string{"axpy", "gemm", "scal"},
	Note:    "a note",
}

// DriverInit is the only InitRequest the fake driver accepts.
var DriverInit = driver.InitRequest{
	Workers: []driver.WorkerSpec{
		{ID: 3, Unit: 0, Dispatch: base.Span{Offset: 4096, Size: 1024}, Completion: base.Span{Offset: 5120, Size: 512}, Bell: 64, CoreBell: 72},
		{ID: 4, Unit: 1, Dispatch: base.Span{Offset: 8192, Size: 1 << 40}, Completion: base.Span{Offset: 1<<63 + 5, Size: 7}, Bell: 80, CoreBell: 1<<64 - 1},
	},
	SpinIters: 1000,
}

// Driver is a fake driver: it checks the requests it gets against the
// fixed ones below.
type Driver struct {
	fakeBase
	arena *shm.Arena

	mu     sync.Mutex
	inited bool
	loaded []string
}

// NewDriver returns a fake driver named name on arena a.
func NewDriver(name string, a *shm.Arena) *Driver {
	return &Driver{fakeBase: fakeBase{base.KindDriver, name}, arena: a}
}

// Fingerprint implements driver.Driver.
func (d *Driver) Fingerprint(context.Context) (*driver.Fingerprint, error) {
	fp := DriverFingerprint
	return &fp, nil
}

// Init implements driver.Driver.
func (d *Driver) Init(_ context.Context, req *driver.InitRequest) error {
	if !reflect.DeepEqual(*req, DriverInit) {
		return fmt.Errorf("init: request mismatch: got %+v", *req)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inited {
		return errors.New("init: already initialised")
	}
	d.inited = true
	return nil
}

// Deinit implements driver.Driver.
func (d *Driver) Deinit(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inited {
		return errors.New("deinit: not initialised")
	}
	d.inited = false
	return nil
}

// LoadKernel implements driver.Driver: it "compiles" sources that start
// with "kernel void NAME" and appends them to the kernel list.
func (d *Driver) LoadKernel(_ context.Context, k driver.KernelSource) (int, error) {
	if !strings.HasPrefix(k.Source, "kernel void "+k.Name) {
		return 0, fmt.Errorf("load kernel %s: build failed:\n<source>:1:1: error: expected 'kernel void %s'", k.Name, k.Name)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.loaded = append(d.loaded, k.Name)
	return len(DriverFingerprint.Kernels) + len(d.loaded) - 1, nil
}

// SchedInit is the only InitRequest the fake scheduler accepts.
var SchedInit = sched.InitRequest{
	Workers: []sched.Worker{
		{ID: 0, Arch: driver.CPU, Node: 0},
		{ID: 1, Arch: driver.CUDA, Node: 1},
		{ID: 1 << 40, Arch: driver.OpenCL, Node: 2},
	},
	Rings: sched.RingRefs{
		Events:    base.Span{Offset: 4096, Size: 65536},
		Decisions: base.Span{Offset: 69632, Size: 1 << 33},
		Bell:      128,
		CoreBell:  136,
	},
	QueueDepth:    2,
	MaxQueueDepth: 16,
	QueuedWork:    250 * time.Microsecond,
	SpinIters:     -1,
}

// Sched is a fake scheduler: Init accepts SchedInit only.
type Sched struct {
	fakeBase
	mu     sync.Mutex
	inited bool
}

// NewSched returns a fake scheduler named name.
func NewSched(name string) *Sched { return &Sched{fakeBase: fakeBase{base.KindScheduler, name}} }

// Init implements sched.Scheduler.
func (s *Sched) Init(_ context.Context, req *sched.InitRequest) error {
	if !reflect.DeepEqual(*req, SchedInit) {
		return fmt.Errorf("init: request mismatch: got %+v", *req)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inited {
		return errors.New("init: already initialised")
	}
	s.inited = true
	return nil
}

// Deinit implements sched.Scheduler.
func (s *Sched) Deinit(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inited {
		return errors.New("deinit: not initialised")
	}
	s.inited = false
	return nil
}

// Iface is a fake data interface "vec": metadata "n=<count>,elem=<bytes>",
// one buffer of n*elem bytes. Pack writes an 8-byte header (n, elem as
// little-endian uint32) and the data; Pack and Unpack really move bytes in
// the arena. Display of the metadata "block" waits for its context.
type Iface struct {
	fakeBase
	arena *shm.Arena
}

// NewIface returns a fake interface named name on arena a.
func NewIface(name string, a *shm.Arena) *Iface {
	return &Iface{fakeBase: fakeBase{base.KindInterface, name}, arena: a}
}

type vecMeta struct{ n, elem uint64 }

func parseVec(meta []byte) (vecMeta, error) {
	var m vecMeta
	fields := strings.Split(string(meta), ",")
	if len(fields) != 2 {
		return m, fmt.Errorf("bad metadata %q: want n=<count>,elem=<bytes>", meta)
	}
	for i, want := range []string{"n", "elem"} {
		k, v, _ := strings.Cut(fields[i], "=")
		if k != want {
			return m, fmt.Errorf("bad metadata field %d: want %s", i, want)
		}
		x, err := strconv.ParseUint(v, 10, 32)
		if err != nil || x == 0 {
			return m, fmt.Errorf("bad metadata field %s: %q", want, v)
		}
		if i == 0 {
			m.n = x
		} else {
			m.elem = x
		}
	}
	return m, nil
}

// Describe implements iface.Interface.
func (f *Iface) Describe(_ context.Context, meta []byte, _ []base.Span) (*iface.Description, error) {
	m, err := parseVec(meta)
	if err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	size := m.n * m.elem
	return &iface.Description{Name: "vec", Buffers: []uint64{size}, Size: size, Footprint: crc32.ChecksumIEEE(meta),
		Layout: kernel.Layout{ElemSize: uint32(m.elem), NX: m.n, LD: size}}, nil
}

// Partition implements iface.Interface: the fake has no filters.
func (f *Iface) Partition(_ context.Context, filter string, _ []byte, _ []base.Span, _ int) ([]iface.Child, error) {
	return nil, fmt.Errorf("partition: no filter %q", filter)
}

// CopyPlan implements iface.Interface: one range, or two when the buffer is
// larger than 64 bytes.
func (f *Iface) CopyPlan(_ context.Context, meta []byte) ([]iface.Range, error) {
	m, err := parseVec(meta)
	if err != nil {
		return nil, fmt.Errorf("copy plan: %w", err)
	}
	size := m.n * m.elem
	if size <= 64 {
		return []iface.Range{{Buffer: 0, Offset: 0, Len: size}}, nil
	}
	return []iface.Range{{Buffer: 0, Offset: 0, Len: 64}, {Buffer: 0, Offset: 64, Len: size - 64}}, nil
}

// Pack implements iface.Interface.
func (f *Iface) Pack(_ context.Context, meta []byte, buffers []base.Span, dst base.Span) (uint64, error) {
	m, err := parseVec(meta)
	if err != nil {
		return 0, fmt.Errorf("pack: %w", err)
	}
	size := m.n * m.elem
	if len(buffers) != 1 || buffers[0].Size < size {
		return 0, fmt.Errorf("pack: want 1 buffer of %d bytes, got %v", size, buffers)
	}
	if dst.Size < 8+size {
		return 0, fmt.Errorf("pack: destination of %d bytes, need %d", dst.Size, 8+size)
	}
	src, err := f.arena.BytesChecked(base.Span{Offset: buffers[0].Offset, Size: size})
	if err != nil {
		return 0, fmt.Errorf("pack: %w", err)
	}
	out, err := f.arena.BytesChecked(base.Span{Offset: dst.Offset, Size: 8 + size})
	if err != nil {
		return 0, fmt.Errorf("pack: %w", err)
	}
	binary.LittleEndian.PutUint32(out[0:], uint32(m.n))
	binary.LittleEndian.PutUint32(out[4:], uint32(m.elem))
	copy(out[8:], src)
	return 8 + size, nil
}

// Unpack implements iface.Interface.
func (f *Iface) Unpack(_ context.Context, meta []byte, src base.Span, buffers []base.Span) error {
	m, err := parseVec(meta)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	size := m.n * m.elem
	if len(buffers) != 1 || buffers[0].Size < size {
		return fmt.Errorf("unpack: want 1 buffer of %d bytes, got %v", size, buffers)
	}
	in, err := f.arena.BytesChecked(src)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if len(in) < 8 {
		return fmt.Errorf("unpack: message of %d bytes", len(in))
	}
	if n, e := binary.LittleEndian.Uint32(in[0:]), binary.LittleEndian.Uint32(in[4:]); uint64(n) != m.n || uint64(e) != m.elem {
		return fmt.Errorf("unpack: message is n=%d,elem=%d, metadata n=%d,elem=%d", n, e, m.n, m.elem)
	}
	if uint64(len(in)) < 8+size {
		return fmt.Errorf("unpack: message of %d bytes, need %d", len(in), 8+size)
	}
	out, err := f.arena.BytesChecked(base.Span{Offset: buffers[0].Offset, Size: size})
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	copy(out, in[8:8+size])
	return nil
}

// Compare implements iface.Interface.
func (f *Iface) Compare(_ context.Context, a, b []byte) (bool, error) {
	ma, err := parseVec(a)
	if err != nil {
		return false, fmt.Errorf("compare: first: %w", err)
	}
	mb, err := parseVec(b)
	if err != nil {
		return false, fmt.Errorf("compare: second: %w", err)
	}
	return ma == mb, nil
}

// Display implements iface.Interface.
func (f *Iface) Display(ctx context.Context, meta []byte) (string, error) {
	if string(meta) == "block" {
		<-ctx.Done()
		return "", fmt.Errorf("display: %w", ctx.Err())
	}
	m, err := parseVec(meta)
	if err != nil {
		return "", fmt.Errorf("display: %w", err)
	}
	return fmt.Sprintf("vec(n=%d, elem=%d)", m.n, m.elem), nil
}

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
}

// DriverInit is the only InitRequest the fake driver accepts.
var DriverInit = driver.InitRequest{
	Workers: []driver.WorkerSpec{
		{ID: 3, Unit: 0, Dispatch: base.Span{Offset: 4096, Size: 1024}, Completion: base.Span{Offset: 5120, Size: 512}, Bell: 64, CoreBell: 72},
		{ID: 4, Unit: 1, Dispatch: base.Span{Offset: 8192, Size: 1 << 40}, Completion: base.Span{Offset: 1<<63 + 5, Size: 7}, Bell: 80, CoreBell: 1<<64 - 1},
	},
	SpinIters: 1000,
}

// Driver is a fake driver with one device memory node, node 1, kept in Go
// memory: Alloc, Free and Copy really move bytes between it and the arena.
type Driver struct {
	fakeBase
	arena *shm.Arena

	mu     sync.Mutex
	inited bool
	next   uint64
	bufs   map[uint64][]byte
}

// NewDriver returns a fake driver named name on arena a.
func NewDriver(name string, a *shm.Arena) *Driver {
	return &Driver{fakeBase: fakeBase{base.KindDriver, name}, arena: a, next: 0x1000, bufs: map[uint64][]byte{}}
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

// Alloc implements driver.Driver.
func (d *Driver) Alloc(_ context.Context, node int, size uint64) (uint64, error) {
	if node != 1 {
		return 0, fmt.Errorf("alloc: no memory node %d", node)
	}
	if size == 0 || size > 1<<30 {
		return 0, fmt.Errorf("alloc: bad size %d", size)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.next
	d.next += 0x1000
	d.bufs[h] = make([]byte, size)
	return h, nil
}

// Free implements driver.Driver.
func (d *Driver) Free(_ context.Context, node int, buffer uint64) error {
	if node != 1 {
		return fmt.Errorf("free: no memory node %d", node)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.bufs[buffer]; !ok {
		return fmt.Errorf("free: unknown buffer %#x", buffer)
	}
	delete(d.bufs, buffer)
	return nil
}

// Copy implements driver.Driver between RAM (node 0, arena offsets) and
// node 1.
func (d *Driver) Copy(_ context.Context, req *driver.CopyRequest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	side := func(node int, buffer, off, n uint64) ([]byte, error) {
		switch node {
		case 0:
			b, err := d.arena.BytesChecked(base.Span{Offset: off, Size: n})
			if err != nil {
				return nil, fmt.Errorf("copy: %w", err)
			}
			return b, nil
		case 1:
			buf, ok := d.bufs[buffer]
			if !ok {
				return nil, fmt.Errorf("copy: unknown buffer %#x", buffer)
			}
			if off > uint64(len(buf)) || n > uint64(len(buf))-off {
				return nil, fmt.Errorf("copy: range %d+%d outside buffer %#x of %d bytes", off, n, buffer, len(buf))
			}
			return buf[off : off+n], nil
		}
		return nil, fmt.Errorf("copy: no memory node %d", node)
	}
	for _, r := range req.Ranges {
		src, err := side(req.SrcNode, req.SrcBuffer, r.SrcOffset, r.Len)
		if err != nil {
			return err
		}
		dst, err := side(req.DstNode, req.DstBuffer, r.DstOffset, r.Len)
		if err != nil {
			return err
		}
		copy(dst, src)
	}
	return nil
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
func (f *Iface) Describe(_ context.Context, meta []byte) (*iface.Description, error) {
	m, err := parseVec(meta)
	if err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	size := m.n * m.elem
	return &iface.Description{Name: "vec", Buffers: []uint64{size}, Size: size, Footprint: crc32.ChecksumIEEE(meta)}, nil
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

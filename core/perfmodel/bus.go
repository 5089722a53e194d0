package perfmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
)

// Bus is the transfer model between memory nodes, StarPU's bus calibration:
// per ordered pair of nodes (named like "RAM", "opencl_0"), a bandwidth in
// MB/s (10^6 bytes per second, i.e. bytes per microsecond) and a latency in
// microseconds. The zero value is an empty model. Predict is safe from any
// number of goroutines and does not allocate; Set is meant for the one-off
// calibration.
type Bus struct {
	mu    sync.Mutex                      // serialises Set
	links atomic.Pointer[map[busKey]Link] // copy-on-write
}

type busKey struct{ src, dst string }

// Link is the measured cost of copying from Src to Dst.
type Link struct {
	Src       string  `json:"src"`
	Dst       string  `json:"dst"`
	MBps      float64 `json:"mbps"`
	LatencyUs float64 `json:"latency_us"`
}

// The bus file: {"format": "starpu-go bus", "version": 1, "hostname": "...",
// "links": [{"src": "RAM", "dst": "opencl_0", "mbps": 5200, "latency_us": 12.5}]}.
const (
	busFormat  = "starpu-go bus"
	busVersion = 1
)

type fileBus struct {
	Format   string `json:"format"`
	Version  int    `json:"version"`
	Hostname string `json:"hostname"`
	Links    []Link `json:"links"`
}

func busPath(dir, host string) string { return filepath.Join(dir, "bus", host+".json") }

// BusPath is the file of this host's bus model in dir, which LoadBus reads
// and Save writes.
func BusPath(dir string) string { return busPath(dir, Hostname(os.Getenv)) }

// Set records the bandwidth (MB/s, above 0) and latency (us, at least 0) of
// copies from src to dst.
func (b *Bus) Set(src, dst string, mbps, latencyUs float64) error {
	if err := checkLink(Link{Src: src, Dst: dst, MBps: mbps, LatencyUs: latencyUs}); err != nil {
		return fmt.Errorf("perfmodel: bus: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	next := map[busKey]Link{}
	if cur := b.links.Load(); cur != nil {
		for k, v := range *cur {
			next[k] = v
		}
	}
	next[busKey{src, dst}] = Link{Src: src, Dst: dst, MBps: mbps, LatencyUs: latencyUs}
	b.links.Store(&next)
	return nil
}

func checkLink(l Link) error {
	switch {
	case l.Src == "" || l.Dst == "":
		return fmt.Errorf("link %q -> %q: empty node name", l.Src, l.Dst)
	case l.Src == l.Dst:
		return fmt.Errorf("link %s -> %s: a node to itself costs nothing", l.Src, l.Dst)
	case !finite(l.MBps) || l.MBps <= 0:
		return fmt.Errorf("link %s -> %s: bandwidth %v MB/s is not above 0", l.Src, l.Dst, l.MBps)
	case !finite(l.LatencyUs) || l.LatencyUs < 0:
		return fmt.Errorf("link %s -> %s: latency %v us is negative", l.Src, l.Dst, l.LatencyUs)
	}
	return nil
}

// Predict returns the time in ns to copy bytes from src to dst: latency +
// bytes/bandwidth. A copy within one node costs 0; ok is false when the
// pair was never measured.
func (b *Bus) Predict(src, dst string, bytes uint64) (ns float64, ok bool) {
	if src == dst {
		return 0, true
	}
	m := b.links.Load()
	if m == nil {
		return 0, false
	}
	l, ok := (*m)[busKey{src, dst}]
	if !ok {
		return 0, false
	}
	// MB/s = bytes/us, so bytes/MBps is in us.
	return (l.LatencyUs + float64(bytes)/l.MBps) * 1e3, true
}

// Links returns the measured links, by source then destination.
func (b *Bus) Links() []Link {
	m := b.links.Load()
	if m == nil {
		return nil
	}
	out := make([]Link, 0, len(*m))
	for _, l := range *m {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Src != out[j].Src {
			return out[i].Src < out[j].Src
		}
		return out[i].Dst < out[j].Dst
	})
	return out
}

// LoadBus reads the bus model of this host from dir/bus/<host>.json. found
// is false (with an empty model) when it was never saved; a file that cannot
// be read is an error naming it.
func LoadBus(dir string) (b *Bus, found bool, err error) {
	path := busPath(dir, Hostname(os.Getenv))
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Bus{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("perfmodel: %w", err)
	}
	var f fileBus
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, false, fmt.Errorf("perfmodel: %s: %w", path, jsonError(raw, err))
	}
	if f.Format != busFormat {
		return nil, false, fmt.Errorf("perfmodel: %s: field format: %q, want %q", path, f.Format, busFormat)
	}
	if f.Version != busVersion {
		return nil, false, fmt.Errorf("perfmodel: %s: field version: %d not supported (this build reads version %d)", path, f.Version, busVersion)
	}
	m := make(map[busKey]Link, len(f.Links))
	for i, l := range f.Links {
		if err := checkLink(l); err != nil {
			return nil, false, fmt.Errorf("perfmodel: %s: field links[%d]: %w", path, i, err)
		}
		if _, dup := m[busKey{l.Src, l.Dst}]; dup {
			return nil, false, fmt.Errorf("perfmodel: %s: field links[%d]: link %s -> %s appears twice", path, i, l.Src, l.Dst)
		}
		m[busKey{l.Src, l.Dst}] = l
	}
	b = &Bus{}
	b.links.Store(&m)
	return b, true, nil
}

// Save writes the bus model to dir/bus/<host>.json atomically.
func (b *Bus) Save(dir string) error {
	host := Hostname(os.Getenv)
	f := fileBus{Format: busFormat, Version: busVersion, Hostname: host, Links: b.Links()}
	if f.Links == nil {
		f.Links = []Link{}
	}
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("perfmodel: encode bus: %w", err)
	}
	return writeAtomic(busPath(dir, host), append(raw, '\n'))
}

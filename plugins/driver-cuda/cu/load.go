package cu

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cushim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Environment variables the default Config reads. Each holds one library
// name or path, or several separated by colons (tried in order).
const (
	// EnvDriverLibrary replaces libcuda.so.1: "/usr/lib64/libcuda.so.1", or
	// a library that is not CUDA at all in tests.
	EnvDriverLibrary = "STARPU_CUDA_LIBRARY"
	// EnvBLASLibrary, EnvSolverLibrary and EnvNVRTCLibrary replace the
	// sonames tried for cuBLAS, cuSOLVER and NVRTC.
	EnvBLASLibrary   = "STARPU_CUBLAS_LIBRARY"
	EnvSolverLibrary = "STARPU_CUSOLVER_LIBRARY"
	EnvNVRTCLibrary  = "STARPU_NVRTC_LIBRARY"
	// EnvLibraryDirs lists directories searched for cuBLAS, cuSOLVER and
	// NVRTC after the dynamic linker's own path, before the defaults
	// ($CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64).
	EnvLibraryDirs = "STARPU_CUDA_LIBDIR"
)

// MinDriverVersion is the oldest driver accepted unless Config says
// otherwise: CUDA 12.0. Every entry point the package resolves exists
// since CUDA 11; 12.0 is where cuBLAS 12 and NVRTC 12 start.
const MinDriverVersion = 12000

// Library names tried when neither the Config nor the environment names
// them (newest first).
var (
	DefaultDriverNames = []string{"libcuda.so.1"}
	DefaultBLASNames   = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}
	DefaultSolverNames = []string{"libcusolver.so.12", "libcusolver.so.11", "libcusolver.so"}
	DefaultNVRTCNames  = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11", "libnvrtc.so"}
)

// Config says which libraries to load. The zero Config is the default:
// each empty field is taken from its environment variable, or else from
// the defaults above.
type Config struct {
	// DriverNames are tried in order for the driver API (default
	// $STARPU_CUDA_LIBRARY, else libcuda.so.1). Only the dynamic linker's
	// path is searched: the toolkit's lib64/stubs/libcuda.so is a stub
	// that cannot run anything.
	DriverNames []string
	// BLASNames, SolverNames, NVRTCNames are tried in order, each first as
	// given, then in every directory of Dirs.
	BLASNames, SolverNames, NVRTCNames []string
	// Dirs are searched for the optional libraries after the linker's path
	// (default $STARPU_CUDA_LIBDIR, $CUDA_HOME/lib64, $CUDA_PATH/lib64,
	// /usr/local/cuda/lib64).
	Dirs []string
	// MinDriverVersion is the oldest driver accepted (default
	// MinDriverVersion); 13000 means CUDA 13.0.
	MinDriverVersion int
	// NoOptional skips cuBLAS, cuSOLVER and NVRTC.
	NoOptional bool
}

// withDefaults fills the empty fields.
func (c Config) withDefaults() Config {
	names := func(v []string, env string, def []string) []string {
		if len(v) > 0 {
			return v
		}
		if e := splitList(os.Getenv(env)); len(e) > 0 {
			return e
		}
		return def
	}
	c.DriverNames = names(c.DriverNames, EnvDriverLibrary, DefaultDriverNames)
	c.BLASNames = names(c.BLASNames, EnvBLASLibrary, DefaultBLASNames)
	c.SolverNames = names(c.SolverNames, EnvSolverLibrary, DefaultSolverNames)
	c.NVRTCNames = names(c.NVRTCNames, EnvNVRTCLibrary, DefaultNVRTCNames)
	if len(c.Dirs) == 0 {
		c.Dirs = splitList(os.Getenv(EnvLibraryDirs))
		for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
			if d := os.Getenv(env); d != "" {
				c.Dirs = append(c.Dirs, filepath.Join(d, "lib64"))
			}
		}
		c.Dirs = append(c.Dirs, "/usr/local/cuda/lib64")
	}
	if c.MinDriverVersion == 0 {
		c.MinDriverVersion = MinDriverVersion
	}
	return c
}

func splitList(s string) []string {
	var out []string
	for _, p := range filepath.SplitList(s) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// LibInfo is what was loaded for one library.
type LibInfo struct {
	// Name is the name that opened, "libcublas.so.13"; "" if none did.
	Name string
	// Path is the file the dynamic linker opened.
	Path string
	// Version is the library's version: for the driver the CUDA version it
	// supports ("13.0"), for cuBLAS and cuSOLVER major.minor.patch, for
	// NVRTC major.minor. "" when unknown.
	Version string
	// Err says why the library is not loaded; nil when it is.
	Err error
}

// Loaded reports whether the library loaded.
func (l LibInfo) Loaded() bool { return l.Err == nil && l.Name != "" }

// Libraries reports each library's load separately.
type Libraries struct {
	Driver, BLAS, Solver, NVRTC LibInfo
	// DriverVersion is cuDriverGetVersion's answer (13000 for CUDA 13.0),
	// 0 when the driver did not load.
	DriverVersion int
}

// libSet is a set of loaded tables; immutable once built.
type libSet struct {
	libs   Libraries
	cfg    Config
	drv    *C.sc_driver
	blas   *C.sc_blas
	solver *C.sc_solver
	nvrtc  *C.sc_nvrtc
}

// opened caches tables by kind and name: dlopen is reference-counted and
// the driver cannot be unloaded once initialized, so a library once loaded
// stays loaded and later loads of the same name reuse its table.
var (
	openMu sync.Mutex
	opened = map[string]openedLib{}
)

type openedLib struct {
	table unsafe.Pointer
	path  string
}

// openLib loads a table of the given kind from the first of names that
// opens and has every required entry point. Bare names are also looked
// for in dirs (when given).
func openLib(lib Lib, names, dirs []string) (unsafe.Pointer, Attempt, error) {
	openMu.Lock()
	defer openMu.Unlock()
	var attempts []Attempt
	for _, name := range candidates(names, dirs) {
		key := fmt.Sprintf("%d:%s", lib, name)
		if o, ok := opened[key]; ok {
			return o.table, Attempt{Name: name, Path: o.path}, nil
		}
		a := Attempt{Name: name}
		var buf [1024]C.char
		cname := C.CString(name)
		h := C.sc_open(cname, &buf[0], C.size_t(len(buf)))
		C.free(unsafe.Pointer(cname))
		if h == nil {
			a.Err = C.GoString(&buf[0])
			attempts = append(attempts, a)
			continue
		}
		var path [4096]C.char
		if C.sc_path(h, &path[0], C.size_t(len(path))) == 0 {
			a.Path = C.GoString(&path[0])
		}
		var missing [8192]C.char
		t := C.sc_load(C.int(lib), h, &missing[0], C.size_t(len(missing)), &buf[0], C.size_t(len(buf)))
		if t == nil {
			a.Err = C.GoString(&buf[0])
			a.Missing = strings.Fields(C.GoString(&missing[0]))
			if lib == LibDriver {
				// A real but old driver lacks newer entry points: keep its
				// version so the caller can say it is too old.
				var v C.int
				if C.sc_driver_version(h, &v) == 0 && v > 0 {
					a.DriverVersion = int(v)
				}
			}
			C.sc_close(h)
			attempts = append(attempts, a)
			continue
		}
		opened[key] = openedLib{table: t, path: a.Path}
		return t, a, nil
	}
	return nil, Attempt{}, &LoadError{Lib: lib, Attempts: attempts}
}

// candidates expands names: a bare soname is tried as is (the dynamic
// linker's search), then in each dir where such a file exists.
func candidates(names, dirs []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, n)
		if strings.ContainsRune(n, '/') {
			continue
		}
		for _, d := range dirs {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// loadSet loads the libraries of cfg (already defaulted). The driver error
// is returned; the optional libraries' errors are in the set's Libraries.
func loadSet(cfg Config) (*libSet, error) {
	s := &libSet{cfg: cfg}
	t, a, err := openLib(LibDriver, cfg.DriverNames, nil)
	if err != nil {
		if le, ok := err.(*LoadError); ok {
			for _, a := range le.Attempts {
				if a.DriverVersion > 0 {
					s.libs.DriverVersion = a.DriverVersion
					if a.DriverVersion < cfg.MinDriverVersion {
						err = &VersionError{Version: a.DriverVersion, Min: cfg.MinDriverVersion, Err: le}
					}
					break
				}
			}
		}
		s.libs.Driver = LibInfo{Err: err}
		return s, err
	}
	s.drv = (*C.sc_driver)(t)
	s.libs.Driver = LibInfo{Name: a.Name, Path: a.Path}
	var v C.int
	if r := C.sc_cuDriverGetVersion(s.drv, &v); r == C.SC_CUDA_SUCCESS {
		s.libs.DriverVersion = int(v)
		s.libs.Driver.Version = VersionString(int(v))
	}
	if cfg.NoOptional {
		return s, nil
	}
	load := func(lib Lib, names []string) (unsafe.Pointer, LibInfo) {
		t, a, err := openLib(lib, names, cfg.Dirs)
		if err != nil {
			return nil, LibInfo{Err: err}
		}
		return t, LibInfo{Name: a.Name, Path: a.Path}
	}
	var p unsafe.Pointer
	p, s.libs.BLAS = load(LibBLAS, cfg.BLASNames)
	s.blas = (*C.sc_blas)(p)
	if s.blas != nil && s.blas.cublasGetProperty != nil {
		s.libs.BLAS.Version = propVersion(func(k int, v *C.int) bool { return C.sc_cublasGetProperty(s.blas, C.int(k), v) == 0 })
	}
	p, s.libs.Solver = load(LibSolver, cfg.SolverNames)
	s.solver = (*C.sc_solver)(p)
	if s.solver != nil && s.solver.cusolverGetProperty != nil {
		s.libs.Solver.Version = propVersion(func(k int, v *C.int) bool { return C.sc_cusolverGetProperty(s.solver, C.int(k), v) == 0 })
	}
	p, s.libs.NVRTC = load(LibNVRTC, cfg.NVRTCNames)
	s.nvrtc = (*C.sc_nvrtc)(p)
	if s.nvrtc != nil {
		var major, minor C.int
		if C.sc_nvrtcVersion(s.nvrtc, &major, &minor) == 0 {
			s.libs.NVRTC.Version = fmt.Sprintf("%d.%d", major, minor)
		}
	}
	return s, nil
}

// propVersion asks a library for MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL.
func propVersion(get func(int, *C.int) bool) string {
	var v [3]C.int
	for i, k := range []int{C.SC_MAJOR_VERSION, C.SC_MINOR_VERSION, C.SC_PATCH_LEVEL} {
		if !get(k, &v[i]) {
			return ""
		}
	}
	return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
}

// The package's libraries, set once by Load.
var (
	loadOnce sync.Once
	loadErr  error
	current  atomic.Pointer[libSet]
)

// Load loads the libraries cfg names and makes them the package's. The
// driver API is required: its error is returned, a *LoadError, or a
// *VersionError for a driver so old it lacks entry points (Init checks
// the version of a complete one). cuBLAS, cuSOLVER and NVRTC are optional
// and their outcome is reported in the Libraries. Load runs once per
// process: later calls (and Init) return the first outcome and ignore cfg.
// It does not initialize the driver: Init does.
func Load(cfg Config) (*Libraries, error) {
	loadOnce.Do(func() {
		s, err := loadSet(cfg.withDefaults())
		loadErr = err
		if err == nil {
			current.Store(s)
		} else {
			current.Store(&libSet{libs: s.libs, cfg: s.cfg})
		}
	})
	s := current.Load()
	libs := s.libs
	return &libs, loadErr
}

// Loaded reports the libraries Load found, nil before Load ran.
func Loaded() *Libraries {
	s := current.Load()
	if s == nil {
		return nil
	}
	libs := s.libs
	return &libs
}

// drv is the driver table, nil before a successful Load.
func drv() *C.sc_driver {
	if s := current.Load(); s != nil {
		return s.drv
	}
	return nil
}

// SymbolNames lists the entry points the package resolves in lib (the
// first name tried for each); optional ones are marked with a trailing "?".
func SymbolNames(lib Lib) []string {
	n := int(C.sc_nsyms(C.int(lib)))
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var opt C.int
		s := C.GoString(C.sc_symname(C.int(lib), C.int(i), &opt))
		if opt != 0 {
			s += "?"
		}
		out = append(out, s)
	}
	return out
}

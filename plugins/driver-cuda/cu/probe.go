package cu

/*
#include "cushim.h"
*/
import "C"

import (
	"fmt"
	"strings"
)

// Machine is what Probe found: the libraries, the driver's version and the
// devices.
type Machine struct {
	Libraries Libraries
	// DriverVersion is cuDriverGetVersion's answer, 13000 for CUDA 13.0;
	// 0 when the driver did not load.
	DriverVersion int
	Devices       []DeviceInfo
	// Peers lists, per device (indexed like Devices), the ordinals of the
	// other devices whose memory contexts on it can access directly
	// (cuDeviceCanAccessPeer).
	Peers [][]int
}

// DriverVersionString is the driver version as "13.0" ("" if unknown).
func (m *Machine) DriverVersionString() string {
	if m.DriverVersion == 0 {
		return ""
	}
	return VersionString(m.DriverVersion)
}

// String describes the machine on a few lines, for `starpu machine`:
//
//	CUDA driver 13.0 (/usr/lib/x86_64-linux-gnu/libcuda.so.1), 1 device
//	  cuda0: NVIDIA H100 80GB HBM3, 79.2 GiB, compute capability 9.0, 132 SMs, PCI 0000:65:00.0
//	  cuBLAS 13.0.0 (libcublas.so.13), cuSOLVER 12.0.3 (libcusolver.so.12), NVRTC 13.0 (libnvrtc.so.13)
//
// Devices that can access each other's memory add a line after theirs:
// "peer access: cuda0->cuda1, cuda1->cuda0".
func (m *Machine) String() string {
	var b strings.Builder
	d := m.Libraries.Driver
	where := d.Path
	if where == "" {
		where = d.Name
	}
	fmt.Fprintf(&b, "CUDA driver %s (%s), %d device", m.DriverVersionString(), where, len(m.Devices))
	if len(m.Devices) != 1 {
		b.WriteString("s")
	}
	for _, dev := range m.Devices {
		fmt.Fprintf(&b, "\n  cuda%d: %s, %.1f GiB, compute capability %d.%d, %d SMs", dev.Ordinal, dev.Name,
			float64(dev.TotalMem)/(1<<30), dev.Major, dev.Minor, dev.Multiprocessors)
		if dev.PCIBusID != "" {
			b.WriteString(", PCI " + dev.PCIBusID)
		}
	}
	var peers []string
	for i, ps := range m.Peers {
		for _, j := range ps {
			peers = append(peers, fmt.Sprintf("cuda%d->cuda%d", i, j))
		}
	}
	if len(peers) > 0 {
		b.WriteString("\n  peer access: " + strings.Join(peers, ", "))
	}
	var libs []string
	for _, l := range []struct {
		lib  Lib
		info LibInfo
	}{{LibBLAS, m.Libraries.BLAS}, {LibSolver, m.Libraries.Solver}, {LibNVRTC, m.Libraries.NVRTC}} {
		switch {
		case l.info.Loaded():
			v := l.info.Version
			if v != "" {
				v = " " + v
			}
			libs = append(libs, fmt.Sprintf("%s%s (%s)", l.lib, v, l.info.Name))
		case l.info.Err != nil:
			libs = append(libs, fmt.Sprintf("no %s: %v", l.lib, l.info.Err))
		}
	}
	if len(libs) > 0 {
		b.WriteString("\n  " + strings.Join(libs, ", "))
	}
	return b.String()
}

// Probe says what the machine has, without changing the package's state
// (Load and Init are separate): the devices with their name, memory,
// compute capability and SM count, the driver version and the optional
// libraries, which devices can access which others' memory (peers), or
// one exact reason there is no usable device:
//
//	libcuda.so.1 not found (libcuda.so.1: cannot open shared object file: No such file or directory)
//	libm.so.6 (/lib/x86_64-linux-gnu/libm.so.6) is not a usable CUDA driver library: it lacks cuGetErrorName and 45 more entry points (...)
//	driver version 11.4 is older than the 12.0 this driver needs
//	cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected
//	no CUDA device: cuDeviceGetCount found none
//
// The Machine is returned even with an error, filled as far as the probe
// got (the libraries, the driver version). cfg is as for Load; the zero
// Config reads the environment (STARPU_CUDA_LIBRARY and friends).
func Probe(cfg Config) (*Machine, error) {
	cfg = cfg.withDefaults()
	s, err := loadSet(cfg)
	m := &Machine{Libraries: s.libs, DriverVersion: s.libs.DriverVersion}
	if err != nil {
		return m, err
	}
	t := s.drv
	var v C.int
	if err := check(t, "cuDriverGetVersion", C.sc_cuDriverGetVersion(t, &v)); err != nil {
		return m, &reasonError{reason: "cuDriverGetVersion failed: " + err.(*Error).Status(), err: err}
	}
	m.DriverVersion = int(v)
	if m.DriverVersion < cfg.MinDriverVersion {
		return m, &VersionError{Version: m.DriverVersion, Min: cfg.MinDriverVersion}
	}
	if err := check(t, "cuInit", C.sc_cuInit(t, 0)); err != nil {
		return m, &reasonError{reason: "cuInit failed: " + err.(*Error).Status(), err: err}
	}
	n, err := deviceCount(t)
	if err != nil {
		return m, &reasonError{reason: "cuDeviceGetCount failed: " + err.(*Error).Status(), err: err}
	}
	if n == 0 {
		return m, &reasonError{reason: "no CUDA device: cuDeviceGetCount found none", err: ErrorNoDevice}
	}
	devs := make([]Device, n)
	for i := 0; i < n; i++ {
		d, err := deviceGet(t, i)
		if err != nil {
			return m, fmt.Errorf("device %d: %w", i, err)
		}
		devs[i] = d
		info, err := deviceInfo(t, d, i)
		if err != nil {
			return m, fmt.Errorf("device %d: %w", i, err)
		}
		m.Devices = append(m.Devices, info)
	}
	m.Peers = make([][]int, n)
	for i := range devs {
		for j := range devs {
			var can C.int
			// A failed query is no peer: copies then go through RAM.
			if i != j && C.sc_cuDeviceCanAccessPeer(t, &can, C.sc_device(devs[i]), C.sc_device(devs[j])) == 0 && can != 0 {
				m.Peers[i] = append(m.Peers[i], j)
			}
		}
	}
	return m, nil
}

// Command driver-crashy is a CPU driver for the core's failure tests: the
// BLAS kernels plus kernels that fail, crash the process (one after
// writing half its buffer), sleep, or wait for a file. With
// STARPU_TEST_CRASHY_EXIT_AT_START set it exits before serving, like a plugin that
// crashes at start; with STARPU_TEST_CRASHY_DIE_STARTING=FILE:N it does so
// the first N times (counted in FILE); with STARPU_TEST_CRASHY_DIE_IN_INIT=FILE
// it dies in its first driver Init (while FILE does not exist).
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/starpu-go/starpu/pluginapi/driver"
	"github.com/starpu-go/starpu/pluginapi/shm"

	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
	"github.com/starpu-go/starpu/plugins/driver-cpu/kernels"
)

func main() {
	if os.Getenv("STARPU_TEST_CRASHY_EXIT_AT_START") != "" {
		os.Exit(3)
	}
	if spec := os.Getenv("STARPU_TEST_CRASHY_DIE_STARTING"); spec != "" {
		file, n, _ := strings.Cut(spec, ":")
		starts, _ := os.ReadFile(file)
		if want, err := strconv.Atoi(n); err == nil && len(starts) < want {
			os.WriteFile(file, append(starts, '.'), 0o600)
			os.Exit(3)
		}
	}
	opts := []cpudriver.Option{cpudriver.WithKernels(kernels.Library()...), cpudriver.WithKernels(
		kernel.Kernel{Name: "test_fail", Func: func(*kernel.Context) error { return errors.New("deliberate failure") }},
		// test_long_fail fails with an error longer than a completion ring
		// message.
		kernel.Kernel{Name: "test_long_fail", Func: func(*kernel.Context) error {
			return errors.New("deliberate failure: " + strings.Repeat("é", 40000))
		}},
		kernel.Kernel{Name: "test_exit", Func: func(*kernel.Context) error { os.Exit(7); return nil }},
		// test_half_exit writes -1 over the first half of its float32
		// buffer, then dies: a driver killed mid-kernel.
		kernel.Kernel{Name: "test_half_exit", Func: func(c *kernel.Context) error {
			x := c.Buffers[0].Float32s()
			for i := range x[:len(x)/2] {
				x[i] = -1
			}
			os.Exit(7)
			return nil
		}},
		kernel.Kernel{Name: "test_panic", Func: func(*kernel.Context) error { panic("deliberate panic") }},
		// test_crash_once: the first time (no file at the path its
		// argument names), writes -1 over half its float32 buffer and
		// dies; afterwards, doubles the buffer.
		kernel.Kernel{Name: "test_crash_once", Func: func(c *kernel.Context) error {
			x := c.Buffers[0].Float32s()
			if f, err := os.OpenFile(string(c.Arg), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
				f.Close()
				for i := range x[:len(x)/2] {
					x[i] = -1
				}
				os.Exit(7)
			}
			for i := range x {
				x[i] *= 2
			}
			return nil
		}},
		// test_gate creates the file its argument names with ".started"
		// added, waits (a minute at most) for the file it names, then
		// doubles its float32 buffer: a kernel a test ends when it wants.
		kernel.Kernel{Name: "test_gate", Func: func(c *kernel.Context) error {
			path := string(c.Arg)
			if err := os.WriteFile(path+".started", nil, 0o600); err != nil {
				return err
			}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
				if _, err := os.Stat(path); err == nil {
					break
				}
				if time.Now().After(deadline) {
					return errors.New("test_gate: the gate was not opened in a minute")
				}
			}
			x := c.Buffers[0].Float32s()
			for i := range x {
				x[i] *= 2
			}
			return nil
		}},
		kernel.Kernel{Name: "test_sleep", Func: func(c *kernel.Context) error {
			time.Sleep(time.Duration(binary.LittleEndian.Uint64(c.Arg)))
			return nil
		}},
	)}
	driver.Serve(func(a *shm.Arena, log hclog.Logger) (driver.Driver, error) {
		return &dyingInit{Driver: cpudriver.New(a, log, opts...), marker: os.Getenv("STARPU_TEST_CRASHY_DIE_IN_INIT")}, nil
	})
}

// dyingInit is the CPU driver, except that its first Init kills the
// process when marker names a file that does not exist yet (it creates it).
type dyingInit struct {
	*cpudriver.Driver
	marker string
}

func (d *dyingInit) Init(ctx context.Context, req *driver.InitRequest) error {
	if d.marker != "" {
		if f, err := os.OpenFile(d.marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			os.Exit(9)
		}
	}
	return d.Driver.Init(ctx, req)
}

package core

// The application as its own CPU kernel plugin.
//
// Design. Kernels are found by name in a driver process (ARCHITECTURE.md,
// decision 2), so an application's own Go kernel has to be compiled into
// some CPU driver binary. Rather than making the user build one, the
// application binary is that driver: Options.Kernels lists the kernels, and
// Init launches os.Executable() in place of the plugin directory's
// driver-cpu, with EnvKernelHost set and the application's own arguments
// and environment. In that child, main runs again up to Init (or to an
// earlier HostKernels call), which sees the variable and, instead of
// starting a runtime, serves the standard CPU driver loop
// (plugins/driver-cpu/cpudriver) over the kernels it was given, then exits.
// A crash in a user kernel is a crash of that child: the core restarts or
// reports it as for any plugin, and the application survives.
//
// One CPU driver hosts every CPU kernel of a run: the libraries an
// application wants (the standard BLAS library, kernels.Library(); a
// vendor's; its own) are composed in Options.Kernels, and a name given
// twice is refused. Rejected alternatives:
//   - Several CPU drivers at once, one per kernel library. A CPU worker is
//     one core's thread in one process; two drivers would either split the
//     cores between libraries (a task could only run on its library's
//     share) or run two workers per core (StarPU never oversubscribes).
//   - Go's plugin package (dlopen of a -buildmode=plugin library into
//     driver-cpu): it needs the library built with the exact same versions
//     of every shared package, which an application's module cannot
//     promise, and it runs the kernel inside driver-cpu's process anyway.
//   - Kernels in the application's own process, called through a ring:
//     a crash in a kernel would take the application down, which the design
//     exists to prevent, and a task would cost a second process hop.

import (
	"errors"
	"fmt"
	"os"

	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/kernel"
	"github.com/starpu-go/starpu/plugins/driver-cpu/cpudriver"
)

// EnvKernelHost is set, to "driver-cpu", in the environment of an
// application the runtime starts again as its own CPU driver (see
// Options.Kernels). Nothing else should set it.
const EnvKernelHost = "STARPU_KERNEL_HOST"

// HostKernels serves ks as the runtime's CPU driver and exits, when this
// process is an application started again by the runtime to host its own
// kernels (EnvKernelHost set); otherwise it returns at once. Init calls it
// with Options.Kernels, so an application need not; one whose main does
// work before Init that must happen once per run (truncating a file)
// calls it first thing in main with the same kernels. What main prints
// before is harmless: the core drops the lines the second run prints
// before its handshake (loader.Candidate.Chatty).
func HostKernels(ks ...kernel.Kernel) {
	if os.Getenv(EnvKernelHost) == "" {
		return
	}
	err := checkKernels(ks)
	if err == nil && len(ks) == 0 {
		err = errors.New("this program was started again to host its CPU kernels, but reached core.Init with no Options.Kernels: they must not depend on anything that differs between runs")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "starpu kernel host: %v\n", err)
		os.Exit(1)
	}
	cpudriver.Serve(cpudriver.WithKernels(ks...))
	os.Exit(0)
}

// checkKernels refuses kernels with no name or function and names given
// twice: composed libraries must not shadow each other silently.
func checkKernels(ks []kernel.Kernel) error {
	seen := make(map[string]int, len(ks))
	for i, k := range ks {
		switch {
		case k.Name == "":
			return fmt.Errorf("Options.Kernels[%d] has no name", i)
		case k.Func == nil:
			return fmt.Errorf("kernel %q (Options.Kernels[%d]) has no function", k.Name, i)
		}
		if j, dup := seen[k.Name]; dup {
			return fmt.Errorf("kernel %q is given twice (Options.Kernels[%d] and [%d]): two kernel libraries define it", k.Name, j, i)
		}
		seen[k.Name] = i
	}
	return nil
}

// kernelHost is the candidate that runs this application as its own CPU
// driver, with the arguments and environment it was started with.
func kernelHost() (loader.Candidate, error) {
	exe, err := os.Executable()
	if err != nil {
		return loader.Candidate{}, fmt.Errorf("Options.Kernels: cannot find this program's binary to start it as the CPU driver: %w", err)
	}
	if _, err := os.Stat(exe); err != nil {
		return loader.Candidate{}, fmt.Errorf("Options.Kernels: this program's binary %s, which would host the kernels: %w", exe, err)
	}
	return loader.Candidate{
		Path:       exe,
		Kind:       base.KindDriver,
		Name:       "cpu",
		Args:       os.Args[1:],
		Env:        []string{EnvKernelHost + "=driver-cpu"},
		InheritEnv: true,
		Chatty:     true,
	}, nil
}

// useKernelHost puts the application in place of the plugin directory's
// driver-cpu when opt lists kernels.
func useKernelHost(opt Options, cands map[string]loader.Candidate) error {
	if len(opt.Kernels) == 0 {
		return nil
	}
	if len(opt.Drivers) > 0 {
		return errors.New("Options.Kernels and Options.Drivers cannot be used together: the kernels need the application started as a CPU driver plugin, and Drivers runs drivers in process")
	}
	if err := checkKernels(opt.Kernels); err != nil {
		return err
	}
	c, err := kernelHost()
	if err != nil {
		return err
	}
	cands["driver-cpu"] = c
	return nil
}

// kernelHostHint adds to a failed start of the application as its CPU
// driver what such a start needs, which the loader cannot know.
func kernelHostHint(c loader.Candidate, err error) error {
	if !c.InheritEnv {
		return err
	}
	return fmt.Errorf("%w\n(Options.Kernels: this program was started again to host its kernels; it must reach core.Init, or core.HostKernels, with the same kernels: a test binary calls core.HostKernels first thing in TestMain)", err)
}

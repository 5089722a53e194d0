package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
)

// runtimeFlags are the flags every command that starts a runtime takes;
// they override the config file and the environment.
type runtimeFlags struct {
	config    string
	pluginDir string
	sched     string
	ncpu      int
	trace     string
}

func (f *runtimeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "config file (default $STARPU_CONFIG)")
	fs.StringVar(&f.pluginDir, "plugin-dir", "", "plugin directory (default $STARPU_PLUGIN_DIR, or plugins/ beside this binary)")
	fs.StringVar(&f.sched, "sched", "", "scheduling policy (default $STARPU_SCHED, or ws)")
	fs.IntVar(&f.ncpu, "ncpu", -2, "CPU workers (default $STARPU_NCPU, or one per core)")
	fs.StringVar(&f.trace, "trace", "", "write a Chrome trace-event JSON of the worker timelines to this file")
}

// start loads the configuration, applies the flags and starts a runtime.
func (f *runtimeFlags) start(ctx context.Context) (*core.Runtime, error) {
	cfg, err := config.Load(os.Getenv, f.config)
	if err != nil {
		return nil, err
	}
	if f.pluginDir != "" {
		cfg.PluginDir = f.pluginDir
	}
	if f.sched != "" {
		cfg.Sched = f.sched
	}
	if f.ncpu != -2 {
		cfg.NCPU = f.ncpu
	}
	return core.Init(ctx, core.Options{Config: cfg, Trace: f.trace != ""})
}

// finish writes the trace if asked and shuts the runtime down.
func (f *runtimeFlags) finish(rt *core.Runtime) error {
	if f.trace != "" {
		fh, err := os.Create(f.trace)
		if err != nil {
			rt.Shutdown()
			return fmt.Errorf("trace: %w", err)
		}
		werr := rt.WriteTrace(fh)
		cerr := fh.Close()
		if werr == nil {
			werr = cerr
		}
		if werr != nil {
			rt.Shutdown()
			return fmt.Errorf("trace %s: %w", f.trace, werr)
		}
	}
	return rt.Shutdown()
}

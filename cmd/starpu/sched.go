package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/starpu-go/starpu/core"
	"github.com/starpu-go/starpu/core/config"
)

// schedCmd is `starpu sched list`: the scheduling policies the plugin
// directory offers, what STARPU_SCHED=help prints at start-up.
func schedCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return usagef("sched: which subcommand? (list)")
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(out, usage)
		return nil
	case "list":
	default:
		return usagef("sched: unknown subcommand %q (list)", args[0])
	}
	c := newCmd("sched list", "[flags]", "List the scheduling policies among the plugins found, each with what it does and\nits settings (config attributes, with their defaults): the names STARPU_SCHED\nand the config file's sched accept. Each plugin is started to ask it.")
	var rf runtimeFlags
	rf.registerSome(c.FlagSet, 0)
	c.refuse("it lists every policy; STARPU_SCHED=NAME selects one when a run starts", "sched")
	c.refuse("it starts no worker", "ncpu", "trace")
	if err := c.parse(args[1:], out); err != nil {
		return err
	}
	cfg, err := config.Load(os.Getenv, rf.config)
	if err != nil {
		return err
	}
	if rf.pluginDir != "" {
		cfg.PluginDir = rf.pluginDir
	}
	ps, where, err := core.SchedPolicies(ctx, cfg, nil)
	if err != nil {
		return err
	}
	return core.WriteSchedPolicies(out, where, ps)
}

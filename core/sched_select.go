// Choosing the scheduling policy by name: StarPU's aliases, STARPU_SCHED=help
// and the list of policies in the plugin directory (`starpu sched list`),
// and the log line that says which policy a run uses.
// docs/design/scheduling.md has the table of policies.

package core

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/go-hclog"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/core/internal/loader"
	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/shm"
)

// SchedPolicy is a scheduling policy the runtime can select: a sched-<name>
// plugin in the plugin directory, or one of StarPU's aliases served by such
// a plugin with a setting (config.SchedAliases).
type SchedPolicy struct {
	// Name is what STARPU_SCHED or the config file's sched selects.
	Name string
	// Plugin is the binary that serves it ("sched-dmda"), Path where it is.
	Plugin, Path string
	// Version and Description are what the plugin says of itself; an
	// alias has its own Description.
	Version, Description string
	// Settings are the config attributes the plugin accepts, with their
	// defaults.
	Settings []base.Attr
	// AliasOf is the policy an alias stands for, and AliasConfig the
	// attributes it sets; empty for a plugin's own policy.
	AliasOf     string
	AliasConfig base.Config
	// Err says why the plugin could not be asked (it did not start, or
	// did not answer); the policy is listed all the same, with what its
	// file name says.
	Err error
}

// schedListArena sizes the arena the listed plugins are started on: they
// only map it, nothing is placed in it.
const schedListArena = 1 << 20

// SchedPolicies lists the scheduling policies among the plugins cfg points
// at (its PluginDir, else its PluginPath), by name, and says where it
// looked: every sched-<name> plugin is started as the runtime starts it,
// asked for its info and configuration schema, and stopped; each of
// StarPU's aliases whose plugin is present is listed too. A plugin that
// does not start is listed with its Err. log receives the plugins' own
// log lines; nil discards them.
func SchedPolicies(ctx context.Context, cfg *config.Config, log hclog.Logger) (_ []SchedPolicy, where string, err error) {
	byLabel, where, err := findPlugins(cfg)
	if err != nil {
		return nil, "", err
	}
	cands := slices.SortedFunc(maps.Values(byLabel), func(a, b loader.Candidate) int { return strings.Compare(a.Label(), b.Label()) })
	if log == nil {
		log = hclog.NewNullLogger()
	}
	arena, err := shm.Create(schedListArena, 0)
	if err != nil {
		return nil, "", fmt.Errorf("list scheduling policies: shared-memory arena: %w", err)
	}
	defer arena.Close()
	var out []SchedPolicy
	byName := map[string]SchedPolicy{}
	for _, c := range cands {
		if c.Kind != base.KindScheduler {
			continue
		}
		p := describePolicy(ctx, c, arena, log)
		out = append(out, p)
		byName[p.Name] = p
	}
	for _, a := range config.SchedAliases() {
		target, ok := byName[a.Policy]
		if !ok || byName[a.Name].Plugin != "" {
			continue // no plugin to serve it, or a plugin of that name serves it
		}
		out = append(out, SchedPolicy{Name: a.Name, Plugin: target.Plugin, Path: target.Path, Version: target.Version,
			Description: a.Doc, Settings: target.Settings, AliasOf: a.Policy, AliasConfig: a.Config, Err: target.Err})
	}
	slices.SortFunc(out, func(x, y SchedPolicy) int { return strings.Compare(x.Name, y.Name) })
	return out, where, nil
}

// describePolicy starts the plugin c and asks it what it is and what it
// takes.
func describePolicy(ctx context.Context, c loader.Candidate, arena *shm.Arena, log hclog.Logger) SchedPolicy {
	p := SchedPolicy{Name: c.Name, Plugin: c.Label(), Path: c.Path}
	proc, err := loader.Launch(ctx, c, loader.Options{Arena: arena, Logger: log})
	if err != nil {
		p.Err = err
		return p
	}
	defer proc.Kill()
	p.Version, p.Description = proc.Info.Version, proc.Info.Description
	s, err := proc.Scheduler()
	if err != nil {
		p.Err = err
		return p
	}
	schema, err := s.ConfigSchema(ctx)
	if err != nil {
		p.Err = fmt.Errorf("%s: config schema: %w", c.Label(), err)
		return p
	}
	p.Settings = schema.Attrs
	return p
}

// WriteSchedPolicies prints the policies found where (SchedPolicies) as
// `starpu sched list` and STARPU_SCHED=help show them: one line per policy
// with its description, then its settings with their types and defaults;
// an alias shows the setting it stands for instead.
func WriteSchedPolicies(w io.Writer, where string, ps []SchedPolicy) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Scheduling policies found %s (STARPU_SCHED=NAME, or sched = \"NAME\" in the config file):\n\n", where)
	if len(ps) == 0 {
		fmt.Fprintf(tw, "  none: no sched-<name> plugin there\n")
	}
	for _, p := range ps {
		name := p.Name
		if name == config.DefaultSched {
			name += " (default)"
		}
		desc := p.Description
		switch {
		case p.AliasOf != "":
			desc = fmt.Sprintf("= %s with %s: %s", p.AliasOf, settings(p.AliasConfig), desc)
		case desc == "":
			desc = "(no description)"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, desc)
		if p.Err != nil {
			fmt.Fprintf(tw, "  \terror: %s\n", oneLine(p.Err.Error()))
			continue
		}
		if p.AliasOf != "" {
			continue
		}
		for _, a := range p.Settings {
			def := a.Default
			if a.Type == base.AttrString {
				def = fmt.Sprintf("%q", def)
			}
			fmt.Fprintf(tw, "  \t  %s = %s (%s)\t%s\n", a.Name, def, a.Type, a.Doc)
		}
	}
	fmt.Fprintf(tw, "\nSettings go in the policy's plugin block: plugin \"sched-NAME\" { config { ... } }.\n")
	return tw.Flush()
}

// settings formats attributes as "a = 1, b = true", sorted by name.
func settings(cfg base.Config) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[k]
		if s, ok := v.(string); ok {
			v = fmt.Sprintf("%q", s)
		}
		parts = append(parts, fmt.Sprintf("%s = %v", k, v))
	}
	return strings.Join(parts, ", ")
}

// oneLine keeps the first line of s: a plugin's start failure may quote
// its stderr.
func oneLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// selectSched resolves the policy names of cfg before the policy is
// loaded, in a copy (cfg is the caller's): StarPU's aliases
// (config.ResolveSchedAliases, for a configuration that did not come from
// config.Load), and config.SchedHelp, which prints the policies found in
// the plugin directory on help, as StarPU prints its list for
// STARPU_SCHED=help, then goes on with config.DefaultSched. A plugin
// directory that cannot be listed is logged, not fatal: the run goes on.
func selectSched(ctx context.Context, cfg *config.Config, log hclog.Logger, help io.Writer) *config.Config {
	c := cfg.Clone()
	c.ResolveSchedAliases()
	if c.Sched != config.SchedHelp {
		return c
	}
	ps, where, err := SchedPolicies(ctx, c, log)
	if err == nil {
		err = WriteSchedPolicies(help, where, ps)
	}
	if err != nil {
		log.Warn("STARPU_SCHED=help: cannot list the scheduling policies", "error", err)
	}
	log.Info("STARPU_SCHED=help: running with the default scheduling policy", "policy", config.DefaultSched)
	c.Sched = config.DefaultSched
	return c
}

// logSched says, at level info, which policy the run uses and with which
// settings: every attribute of the policy's schema, with the value the
// configuration gives it or its default, and the alias it was selected
// by. s is the loaded policy, already configured.
func logSched(ctx context.Context, log hclog.Logger, cfg *config.Config, s base.Plugin) {
	if !log.IsInfo() {
		return // asking an out-of-process policy for its schema costs a call
	}
	args := []any{"policy", cfg.Sched}
	if cfg.SchedAlias != "" {
		args = append(args, "as", cfg.SchedAlias)
	}
	schema, err := s.ConfigSchema(ctx)
	if err != nil {
		log.Info("scheduling policy", append(args, "settings", "unknown: "+err.Error())...)
		return
	}
	set := cfg.Plugin("sched-" + cfg.Sched)
	var parts []string
	for _, a := range schema.Attrs {
		v := a.Default
		if x, ok := set[a.Name]; ok {
			v = fmt.Sprint(x)
		}
		parts = append(parts, a.Name+"="+v) // unquoted: the log quotes the whole list
	}
	log.Info("scheduling policy", append(args, "settings", strings.Join(parts, " "))...)
}

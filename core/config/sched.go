package config

import (
	"maps"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// SchedHelp is the policy name that asks for the list of policies instead
// of one (STARPU_SCHED=help, as in StarPU): the runtime prints the list
// and goes on with DefaultSched.
const SchedHelp = "help"

// SchedAlias is one of StarPU's policy names that this runtime serves with
// another policy's plugin and a setting: dmdas is the dmda plugin with
// sorted = true. Selecting the alias selects the plugin with the setting,
// unless the configuration sets that attribute itself.
type SchedAlias struct {
	// Name is what STARPU_SCHED or sched selects ("dmdas").
	Name string
	// Policy is the policy whose plugin serves it ("dmda": sched-dmda).
	Policy string
	// Config holds the attributes the alias sets.
	Config base.Config
	// Doc says in one line what the alias is.
	Doc string
}

// SchedAliases lists StarPU's policy names served by another policy's
// plugin with a setting. Each call returns a fresh list.
func SchedAliases() []SchedAlias {
	return []SchedAlias{
		{Name: "dmdar", Policy: "dmda", Config: base.Config{"ready": true},
			Doc: "ready first: a worker takes first, among its most urgent tasks, one whose data is on its node (StarPU's dmdar)"},
		{Name: "dmdas", Policy: "dmda", Config: base.Config{"sorted": true},
			Doc: "each worker's queue sorted by priority (StarPU's dmdas)"},
	}
}

// LookupSchedAlias returns the alias named name, if name is one.
func LookupSchedAlias(name string) (SchedAlias, bool) {
	for _, a := range SchedAliases() {
		if a.Name == name {
			return a, true
		}
	}
	return SchedAlias{}, false
}

// withAlias returns a copy of cfg (nil: empty) with the alias's attributes
// added where cfg does not set them: an attribute the user set wins.
func withAlias(cfg base.Config, a SchedAlias) base.Config {
	out := maps.Clone(cfg)
	if out == nil {
		out = base.Config{}
	}
	for k, v := range a.Config {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out
}

// merged is the configuration of a plugin block, overlaid by that of the
// block named after the alias (`plugin "sched-dmdas" { config { ... } }`
// configures dmdas), as found in blocks.
func merged(blocks map[string]Plugin, a SchedAlias) base.Config {
	out := maps.Clone(blocks["sched-"+a.Policy].Config)
	if out == nil {
		out = base.Config{}
	}
	maps.Copy(out, blocks["sched-"+a.Name].Config)
	return out
}

// ResolveSchedAliases replaces StarPU's alias policy names (SchedAliases)
// by the policies that serve them, moving each alias's setting into the
// configuration that policy instance gets:
//
//   - Sched "dmdas" becomes Sched "dmda", SchedAlias "dmdas", and the
//     sched-dmda plugin block gets sorted = true unless it (or a
//     sched-dmdas block, whose attributes it takes) sets sorted;
//   - each context goes through ResolveContextSched.
//
// A sched-<alias> block used so is removed, since no plugin has that name.
// Names that are not aliases are left alone, so calling it again changes
// nothing.
func (c *Config) ResolveSchedAliases() {
	if a, ok := LookupSchedAlias(c.Sched); ok {
		// Contexts, now and later, are resolved against the blocks as
		// the user wrote them, not as the global alias changes them.
		c.userPlugins = maps.Clone(c.Plugins)
		name := "sched-" + a.Policy
		blk := c.userPlugins[name]
		if blk.Restarts == nil {
			blk.Restarts = c.userPlugins["sched-"+a.Name].Restarts
		}
		blk.Name, blk.Config = name, withAlias(merged(c.userPlugins, a), a)
		if c.Plugins == nil {
			c.Plugins = map[string]Plugin{}
		}
		c.Plugins[name] = blk
		delete(c.Plugins, "sched-"+a.Name)
		c.Sched, c.SchedAlias = a.Policy, a.Name
	}
	var used []string
	for i, x := range c.Contexts {
		if a, ok := LookupSchedAlias(x.Sched); ok && x.Config == nil {
			used = append(used, "sched-"+a.Name) // its attributes go into the context's Config
		}
		c.Contexts[i] = c.ResolveContextSched(x)
	}
	for _, name := range used {
		delete(c.Plugins, name)
	}
}

// ResolveContextSched applies the aliases to a context's policy, for the
// contexts of the configuration (ResolveSchedAliases) and those created
// later through the API, against the plugin blocks as the user wrote them:
//
//   - a context whose Sched is an alias gets the policy and, in its own
//     Config, the alias's setting over its Config or, when it has none,
//     over the plugin block's (and the sched-<alias> block's);
//   - a context that names the policy the global Sched's alias resolved
//     to, with no Config of its own, gets the plugin block as the user
//     wrote it, without the global alias's setting;
//
// other contexts come back as they are (an empty Sched runs the global
// policy, alias included).
func (c *Config) ResolveContextSched(x Context) Context {
	blocks := c.userPlugins
	if blocks == nil {
		blocks = c.Plugins
	}
	if a, ok := LookupSchedAlias(x.Sched); ok {
		cfg := x.Config
		if cfg == nil {
			cfg = merged(blocks, a)
		}
		x.Sched, x.Config = a.Policy, withAlias(cfg, a)
		return x
	}
	if c.SchedAlias != "" && x.Sched == c.Sched && x.Config == nil {
		x.Config = maps.Clone(blocks["sched-"+x.Sched].Config)
		if x.Config == nil {
			x.Config = base.Config{}
		}
	}
	return x
}

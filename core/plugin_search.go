package core

// Where plugins come from: config.PluginDir alone when set, else the first
// plugin of each name along config.PluginPath (STARPU_PLUGIN_PATH, beside
// the executable, the user's and the installation's directories).

import (
	"fmt"

	"github.com/starpu-go/starpu/core/config"
	"github.com/starpu-go/starpu/core/internal/loader"
)

// findPlugins lists the plugins cfg points at, by "<kind>-<name>", and says
// where it looked, for messages ("in DIR", or the path with what each
// directory held). An explicit PluginDir that cannot be listed is an
// error; along the path, absent directories are skipped, and finding no
// plugin at all is an error that lists every directory tried.
func findPlugins(cfg *config.Config) (map[string]loader.Candidate, string, error) {
	var (
		cs    []loader.Candidate
		where string
	)
	if cfg.PluginDir != "" {
		var err error
		if cs, err = loader.Discover(cfg.PluginDir); err != nil {
			return nil, "", err
		}
		where = "in " + cfg.PluginDir
	} else {
		var search loader.Search
		cs, search = loader.DiscoverPath(cfg.PluginPath)
		where = "on the plugin path: " + search.String()
		if len(cs) == 0 {
			return nil, "", fmt.Errorf("no plugins found %s; build them (make) and set %s or %s, or install them (make install PREFIX=DIR)", where, config.EnvPluginPath, config.EnvPluginDir)
		}
	}
	m := make(map[string]loader.Candidate, len(cs))
	for _, c := range cs {
		m[c.Label()] = c
	}
	return m, where, nil
}

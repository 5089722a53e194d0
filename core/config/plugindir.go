package config

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
)

// pluginDirAttr is the plugin directory that the plugin_dir attribute dir
// names. The plugin directory holds the executables the runtime starts, so
// where it is must not depend on where the program happens to be run: a
// relative dir is joined to baseDir, the directory of the file it was read
// from, and is an error when there is no such file (baseDir is "").
func pluginDirAttr(attr *hcl.Attribute, dir, baseDir string) (string, *hcl.Diagnostic) {
	if filepath.IsAbs(dir) {
		return filepath.Clean(dir), nil
	}
	if baseDir == "" {
		return "", invalid(attr, fmt.Sprintf("The plugin directory %q is relative, and this configuration was not read from a file it could be relative to; write an absolute path.", dir))
	}
	return filepath.Join(baseDir, dir), nil
}

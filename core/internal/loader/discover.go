package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// Candidate is a plugin binary found in the plugin directory.
type Candidate struct {
	// Path is the binary's path.
	Path string
	// Kind is the plugin kind, from the file name.
	Kind base.Kind
	// Name is the plugin's name within its kind, from the file name.
	Name string
}

// Label is how the core names the plugin in logs and errors:
// "<kind>-<name>", the binary's file name.
func (c Candidate) Label() string { return string(c.Kind) + "-" + c.Name }

// Kinds lists the plugin kinds the loader knows, in the order Discover
// returns them.
var Kinds = []base.Kind{base.KindDriver, base.KindScheduler, base.KindInterface}

func knownKind(k base.Kind) bool {
	for _, known := range Kinds {
		if k == known {
			return true
		}
	}
	return false
}

// ParseName splits a plugin file name "<kind>-<name>" into its kind and
// name; ok is false when the kind is not one of Kinds or the name is empty.
func ParseName(file string) (kind base.Kind, name string, ok bool) {
	k, n, found := strings.Cut(file, "-")
	if !found || n == "" || !knownKind(base.Kind(k)) {
		return "", "", false
	}
	return base.Kind(k), n, true
}

// Discover lists the plugins in dir: the executable regular files (symbolic
// links are followed) named "<kind>-<name>" with a known kind, ordered by
// kind (Kinds) then name. Other files are ignored. A missing or unreadable
// dir is an error that names it.
//
// dir must be safe: it and every directory above it must be owned by the
// current user or root and writable by their owner only (a directory above
// it may be writable by all if its sticky bit is set, as /tmp is), else
// whoever could write them could make the runtime run their code. An
// unsafe dir is an error wrapping ErrUnsafePath that names the offending
// directory and its mode. The plugins themselves are checked by Launch.
func Discover(dir string) ([]Candidate, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("plugin directory %s does not exist", dir)
		}
		return nil, fmt.Errorf("plugin directory %s: %w", dir, err)
	}
	if err := checkTrusted(dir); err != nil {
		return nil, fmt.Errorf("plugin directory %s refused: %w", dir, err)
	}
	byKind := make(map[base.Kind][]Candidate)
	for _, e := range entries {
		kind, name, ok := ParseName(e.Name())
		if !ok {
			continue
		}
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		// ReadDir sorts by file name, so names come sorted within a kind.
		byKind[kind] = append(byKind[kind], Candidate{Path: path, Kind: kind, Name: name})
	}
	var out []Candidate
	for _, k := range Kinds {
		out = append(out, byKind[k]...)
	}
	return out, nil
}

package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	// Args are the process's arguments after its name: none for a plugin
	// binary; the application's own for an application that hosts its
	// kernels, whose main runs again up to core.Init and may read them.
	Args []string
	// Env holds variables set for this launch besides the inherited ones.
	Env []string
	// InheritEnv passes the core's whole environment instead of the
	// allow-list: the application's own binary needs what its main reads
	// before core.Init, as any run of it does.
	InheritEnv bool
	// Chatty: the process may print lines of its own before its
	// handshake, which the loader drops (an application started again to
	// host its kernels prints what its main prints before core.Init, as a
	// test binary under `go test -v` prints "=== RUN"; the first run of
	// the program printed them already).
	Chatty bool
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
			return nil, fmt.Errorf("plugin directory %s does not exist: %w", dir, fs.ErrNotExist)
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

// Looked is one directory of a search path and what the search found there.
type Looked struct {
	Dir string
	// Found is how many plugins the directory held; Note why none were
	// taken from it when it could not be read ("does not exist", or the
	// reason it was refused).
	Found int
	Note  string
}

// Search is where DiscoverPath looked, in order.
type Search []Looked

// String lists the directories with what each held: "A (3 plugins), B
// (does not exist)".
func (s Search) String() string {
	parts := make([]string, 0, len(s))
	for _, l := range s {
		note := l.Note
		if note == "" {
			note = fmt.Sprintf("%d plugins", l.Found)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", l.Dir, note))
	}
	return strings.Join(parts, ", ")
}

// DiscoverPath lists the plugins along a search path, as a shell finds
// commands along PATH: for each "<kind>-<name>", the first directory of
// dirs that holds it wins. A directory that does not exist, cannot be
// read or is unsafe (see Discover) is skipped: a search path names places
// that may hold plugins, and one that is absent is no error. The Search
// says what each directory gave, for messages.
func DiscoverPath(dirs []string) ([]Candidate, Search) {
	var search Search
	seen := map[string]bool{}
	byKind := make(map[base.Kind][]Candidate)
	for _, dir := range dirs {
		l := Looked{Dir: dir}
		cs, err := Discover(dir)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist):
			l.Note = "does not exist"
		default:
			// Discover's errors name dir ("plugin directory DIR: ..." or
			// "... DIR refused: ..."), which the Search already shows.
			l.Note = strings.TrimLeft(strings.TrimPrefix(err.Error(), "plugin directory "+dir), ": ")
		}
		for _, c := range cs {
			if !seen[c.Label()] {
				seen[c.Label()] = true
				byKind[c.Kind] = append(byKind[c.Kind], c)
			}
		}
		l.Found = len(cs)
		search = append(search, l)
	}
	var out []Candidate
	for _, k := range Kinds {
		cs := byKind[k]
		slices.SortFunc(cs, func(a, b Candidate) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, cs...)
	}
	return out, search
}

package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrUnsafePath is wrapped by the errors of Discover and Launch that refuse
// a plugin directory or binary which someone other than the current user
// or root could change.
var ErrUnsafePath = errors.New("unsafe plugin path")

// checkTrusted refuses path unless only the current user or root can change
// what it names: path itself (symbolic links followed) must be owned by
// the current user or root and not be writable by its group or others, and
// so must every directory above it, on the path as written and on the path
// with links resolved (whoever can write a directory can replace what is
// in it), except that a directory above it may be writable by all when its
// sticky bit is set (/tmp: others cannot rename or remove what is not
// theirs).
func checkTrusted(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	if err := trusted(real, false); err != nil {
		return err
	}
	seen := map[string]bool{real: true}
	for _, p := range []string{abs, real} {
		for d := filepath.Dir(p); !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			if err := trusted(d, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// trusted checks the owner and mode of one path (symbolic links followed).
func trusted(path string, stickyOK bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%w: cannot tell who owns %s", ErrUnsafePath, path)
	}
	mode := fi.Mode()
	if me := os.Geteuid(); st.Uid != 0 && int(st.Uid) != me {
		return fmt.Errorf("%w: %s is owned by uid %d, neither you (uid %d) nor root (mode %s)",
			ErrUnsafePath, path, st.Uid, me, modeString(mode))
	}
	if mode.Perm()&0o022 != 0 && !(stickyOK && mode&fs.ModeSticky != 0) {
		var who []string
		if mode.Perm()&0o020 != 0 {
			who = append(who, "its group")
		}
		if mode.Perm()&0o002 != 0 {
			who = append(who, "all users")
		}
		return fmt.Errorf("%w: %s is writable by %s (mode %s); make it writable by its owner only: chmod go-w %s",
			ErrUnsafePath, path, strings.Join(who, " and "), modeString(mode), path)
	}
	return nil
}

// modeString is a mode as ls and chmod write it: "drwxrwxrwx (0777)".
func modeString(m fs.FileMode) string {
	octal := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		octal |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		octal |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		octal |= 0o1000
	}
	return fmt.Sprintf("%s, %04o", m, octal)
}

package loader

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// The handshake line a plugin prints names the address the core dials
// (go-plugin's "core|app|network|address|protocol|cert"). A plugin is
// told to listen on a unix socket in the socket directory the loader made
// for it; a line naming anything else (a TCP address, a socket elsewhere)
// would have the core dial wherever a compromised or confused plugin says.
// handshakeGuard reads the plugin's standard output for go-plugin and
// replaces such a first line with one go-plugin refuses, keeping why for
// the start error. Rejected: checking the address in a gRPC dialer of our
// own (go-plugin holds its client's lock while it dials, and its address
// is only known under that lock).

// maxHandshakeLine bounds the first line the guard holds back.
const maxHandshakeLine = 64 << 10

// maxChatter bounds what a chatty process (Candidate.Chatty) may print
// before its handshake: past it, go-plugin sees the next line and refuses
// it, so that a process that never handshakes is still reported.
const maxChatter = 1 << 20

// handshakeGuard passes a plugin's standard output through, except a first
// line that is a handshake naming an address outside dir. For a chatty
// process it drops the lines before the first that looks like a handshake.
type handshakeGuard struct {
	r       io.ReadCloser
	dir     string
	refused *atomic.Pointer[string]
	chatty  bool
	logger  hclog.Logger
	dropped int // bytes of chatter dropped

	first   bool   // the first line was seen
	pending []byte // read, not yet returned
}

func (g *handshakeGuard) Read(p []byte) (int, error) {
	for !g.first {
		i := bytes.IndexByte(g.pending, '\n')
		if i < 0 && len(g.pending) < maxHandshakeLine {
			buf := make([]byte, 4096)
			n, err := g.r.Read(buf)
			g.pending = append(g.pending, buf[:n]...)
			if err == nil || n > 0 {
				continue
			}
			g.first = true // no full line: go-plugin sees what came
			if len(g.pending) == 0 {
				return 0, err
			}
			break
		}
		if i >= 0 && g.chatty && !isHandshake(string(g.pending[:i])) && g.dropped+i < maxChatter {
			g.logger.Debug("dropped a line the process printed before its handshake", "line", string(g.pending[:min(i, 200)]))
			g.dropped += i + 1
			g.pending = g.pending[i+1:]
			continue
		}
		g.first = true
		if i >= 0 {
			if why := badHandshake(string(g.pending[:i]), g.dir); why != "" {
				g.refused.Store(&why)
				g.pending = append([]byte("refused: "+why+"\n"), g.pending[i+1:]...)
			}
		}
	}
	if len(g.pending) > 0 {
		n := copy(p, g.pending)
		g.pending = g.pending[n:]
		return n, nil
	}
	return g.r.Read(p)
}

func (g *handshakeGuard) Close() error { return g.r.Close() }

// isHandshake reports whether line has the shape of go-plugin's handshake:
// at least five fields separated by "|", the first a number (the core
// protocol version).
func isHandshake(line string) bool {
	f := strings.Split(strings.TrimSpace(line), "|")
	return len(f) >= 5 && f[0] != "" && strings.Trim(f[0], "0123456789") == ""
}

// badHandshake says why line, a go-plugin handshake line, names an address
// the core must not dial, or "" when it is a unix socket inside dir or not
// a handshake line at all (go-plugin refuses those itself).
func badHandshake(line, dir string) string {
	if !isHandshake(line) {
		return ""
	}
	f := strings.Split(strings.TrimSpace(line), "|")
	network, addr := f[2], f[3]
	if network != "unix" {
		return fmt.Sprintf("its handshake names a %s address (%s): a plugin listens on a unix socket in the directory the core gives it", network, addr)
	}
	clean := filepath.Clean(addr)
	if !filepath.IsAbs(clean) || !strings.HasPrefix(clean, filepath.Clean(dir)+string(filepath.Separator)) {
		return fmt.Sprintf("its handshake names the socket %s, outside the directory the core gives it (%s)", addr, dir)
	}
	return ""
}

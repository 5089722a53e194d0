// Package dashboard serves the runtime's live dashboard: a self-contained
// web page and the JSON snapshot it polls. The runtime side (what a
// snapshot holds and how it is taken) is core's stats_dashboard.go; the
// design note is docs/design/tracing.md.
//
// # Design
//
// The page polls. It is one HTML file with its script and style inline,
// embedded in the binary, which fetches nothing but /api/snapshot: it
// works on a machine without network and loads nothing from elsewhere.
// Every second (or every ?interval= milliseconds) it GETs /api/snapshot
// and redraws its tables from the answer.
//
// The runtime is sampled on demand, when a request comes, and never
// otherwise: with no page open the dashboard costs an idle listening
// socket. A sample is shared by every request within MinInterval of it,
// so that ten open pages cost what one does, and its rates (throughput,
// busy fractions) are the differences with the previous sample over the
// time between them.
//
// Rejected alternatives:
//   - server push (Server-Sent Events, a WebSocket) fed by a sampling
//     goroutine: it samples on a timer while a page is open, which polling
//     does too, and adds a goroutine, a timer and a stream per client for
//     no fresher data than a poll a second gives;
//   - counters updated per task for the dashboard: the runtime already
//     keeps per-codelet, per-worker counts and the engine's tables; adding
//     per-task work would cost the hot path whether anyone looks or not;
//   - a JavaScript charting library or a CDN: the page must work offline
//     (clusters without Internet access, the tests) and stay small.
//
// The server has no authentication: bind it to localhost, or put it
// behind a proxy that authenticates.
package dashboard

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MinInterval is the shortest time between two samples of the runtime:
// requests closer than that to the last sample get it again.
const MinInterval = 100 * time.Millisecond

// SampleTimeout bounds how long a sample may wait for the runtime (the
// Source's context ends then).
const SampleTimeout = 2 * time.Second

//go:embed page.html
var page []byte

// Source takes a snapshot of the runtime. It must return by ctx's end,
// leaving out what it could not get in time (and saying so in
// Snapshot.Engine). The server sets Time and the rates.
type Source func(ctx context.Context) Snapshot

// Server serves the dashboard on one listening socket.
type Server struct {
	ln     net.Listener
	http   *http.Server
	src    Source
	served chan error
	once   sync.Once
	closed error

	// mu serialises sampling: a request that finds a sample under way
	// waits for it and shares it. It guards prev and body.
	mu   sync.Mutex
	prev *Snapshot
	body []byte
	// now is the sampling clock: time.Now, or a test's.
	now func() time.Time

	// loopback: bound to a loopback address, where only requests naming
	// a loopback host are answered (a DNS rebinding page names its own).
	loopback bool
	// token, when set, is asked of every request (SetToken).
	token string
}

// Exposed reports whether the server listens beyond the loopback
// interface (an address given explicitly), which has the caller warn.
func (s *Server) Exposed() bool { return !s.loopback }

// SetToken makes the server answer only requests that carry tok: as
// ?token=, which also sets a cookie so that the page's own requests carry
// it, as that cookie, or as "Authorization: Bearer". Before Serve.
func (s *Server) SetToken(tok string) { s.token = tok }

// Listen binds addr (host:port; port 0 picks a free port) so that a bad
// address or a port in use is an error now; Serve then starts answering.
// With no host (":8090") it binds the loopback interface: the page shows
// pids, codelet names and plugin errors, so exposing it must be asked for
// by naming a host (0.0.0.0 for every interface).
func Listen(addr string) (*Server, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard address %q: %w (want host:port, such as 127.0.0.1:8090)", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("dashboard address %q: port %q is not a number from 0 to 65535", addr, port)
	}
	host, _, _ := net.SplitHostPort(addr)
	bind := addr
	if host == "" {
		bind = net.JoinHostPort("127.0.0.1", port)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("dashboard address %q: %w", addr, err)
	}
	ip := ln.Addr().(*net.TCPAddr).IP
	return &Server{ln: ln, now: time.Now, loopback: ip.IsLoopback()}, nil
}

// Addr is the address the server listens on, host:port, with the port
// chosen when the one asked for was 0.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve starts answering requests in a goroutine of its own, with
// snapshots from src; errLog (nil: the log package's) receives the HTTP
// server's errors, such as a connection it could not accept. It is called
// once.
func (s *Server) Serve(src Source, errLog *log.Logger) {
	s.src = src
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.servePage)
	mux.HandleFunc("GET /api/snapshot", s.serveSnapshot)
	s.http = &http.Server{
		Handler:           s.guard(mux),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      SampleTimeout + 5*time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          errLog,
	}
	s.served = make(chan error, 1)
	go func() { s.served <- s.http.Serve(s.ln) }()
}

// Close stops the server: it stops listening, lets the requests under way
// finish until ctx ends, then closes their connections. A server that
// never served just closes its socket. Later calls return the first's
// result.
func (s *Server) Close(ctx context.Context) error {
	s.once.Do(func() { s.closed = s.close(ctx) })
	return s.closed
}

func (s *Server) close(ctx context.Context) error {
	if s.http == nil {
		return s.ln.Close()
	}
	err := s.http.Shutdown(ctx)
	if err != nil {
		// Past ctx the connections are closed, as the doc says: a
		// connection a browser or client opened and sent nothing on (a
		// transport dials ahead) keeps Shutdown waiting, and is no error.
		cerr := s.http.Close()
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			err = nil
		}
		err = errors.Join(err, cerr)
	}
	if serr := <-s.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("dashboard: close: %w", err)
	}
	return nil
}

// guard answers 403 to a request whose Host names no loopback host while
// the server listens on loopback (DNS rebinding: a page of another site
// whose name resolves to 127.0.0.1), and 401 to one without the token
// when SetToken gave one.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.loopback && !loopbackHost(r.Host) {
			http.Error(w, "dashboard: this server answers only requests to localhost", http.StatusForbidden)
			return
		}
		if s.token != "" {
			given := r.URL.Query().Get("token")
			if c, err := r.Cookie(tokenCookie); given == "" && err == nil {
				given = c.Value
			}
			if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); given == "" && ok {
				given = b
			}
			if subtle.ConstantTimeCompare([]byte(given), []byte(s.token)) != 1 {
				http.Error(w, "dashboard: a token is required (open the page with ?token=...)", http.StatusUnauthorized)
				return
			}
			if r.URL.Query().Get("token") != "" {
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			}
		}
		next.ServeHTTP(w, r)
	})
}

// tokenCookie carries the token for the page's own requests.
const tokenCookie = "starpu_dashboard_token"

// loopbackHost reports whether host (a Host header: name or IP, with or
// without a port) names the loopback interface.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// The page talks to this server alone.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(page)
}

func (s *Server) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	body, err := s.snapshotJSON(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(body)
}

// snapshotJSON returns the last sample's JSON if it is younger than
// MinInterval, else takes a new one.
func (s *Server) snapshotJSON(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.prev != nil && now.Sub(s.prev.Time) < MinInterval {
		return s.body, nil
	}
	ctx, cancel := context.WithTimeout(ctx, SampleTimeout)
	defer cancel()
	snap := s.src(ctx)
	snap.Time = now
	rates(&snap, s.prev)
	body, err := json.Marshal(&snap)
	if err != nil {
		return nil, fmt.Errorf("dashboard: encode snapshot: %w", err)
	}
	s.prev, s.body = &snap, body
	return body, nil
}

// rates fills cur's throughput and busy fractions from the counts'
// differences with prev, over the time between them.
func rates(cur, prev *Snapshot) {
	if prev == nil {
		return
	}
	dt := cur.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		return
	}
	cur.Tasks.IntervalS = dt
	cur.Tasks.Throughput = max(0, float64(cur.Tasks.Done-prev.Tasks.Done)) / dt
	before := make(map[int]int64, len(prev.Workers))
	for _, w := range prev.Workers {
		before[w.ID] = w.ExecNs
	}
	for i := range cur.Workers {
		w := &cur.Workers[i]
		if ns, ok := before[w.ID]; ok {
			w.Busy = min(1, max(0, float64(w.ExecNs-ns)/1e9/dt))
		}
	}
}

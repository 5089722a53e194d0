package dashboard

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	snap := func(at time.Duration, done int64, exec ...int64) *Snapshot {
		s := &Snapshot{Time: t0.Add(at), Tasks: Tasks{Done: done}}
		for i, ns := range exec {
			s.Workers = append(s.Workers, Worker{ID: i, ExecNs: ns})
		}
		return s
	}
	for _, c := range []struct {
		name       string
		prev, cur  *Snapshot
		throughput float64
		busy       []float64
	}{
		{"first", nil, snap(0, 10, 5e8), 0, []float64{0}},
		{"half a second", snap(0, 10, 0, 0), snap(500*time.Millisecond, 60, 25e7, 5e8), 100, []float64{0.5, 1}},
		// A task longer than the interval completes in it: clamped.
		{"long task", snap(0, 0, 0), snap(time.Second, 1, 3e9), 1, []float64{1}},
		{"same time", snap(0, 0, 0), snap(0, 5, 1e9), 0, []float64{0}},
		{"new worker", snap(0, 0), snap(time.Second, 0, 1e9), 0, []float64{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rates(c.cur, c.prev)
			if c.cur.Tasks.Throughput != c.throughput {
				t.Errorf("throughput %v, want %v", c.cur.Tasks.Throughput, c.throughput)
			}
			for i, w := range c.cur.Workers {
				if w.Busy != c.busy[i] {
					t.Errorf("worker %d busy %v, want %v", i, w.Busy, c.busy[i])
				}
			}
		})
	}
}

// TestShared: requests within MinInterval of a sample share it; a later
// one takes a new sample; Close stops the server and may be called again.
func TestShared(t *testing.T) {
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	// The sampling clock is the test's: requests a loaded machine runs
	// far apart still come within MinInterval when the test says so.
	var clock sync.Mutex
	now := time.Unix(1e9, 0)
	s.now = func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}
	s.Serve(func(ctx context.Context) Snapshot {
		return Snapshot{Engine: "ok", Tasks: Tasks{Done: n.Add(1)}}
	}, nil)
	get := func() Snapshot {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr() + "/api/snapshot")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var snap Snapshot
		if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
			t.Fatal(err)
		}
		return snap
	}
	a, b := get(), get()
	if a.Tasks.Done != 1 || b.Tasks.Done != 1 || !a.Time.Equal(b.Time) {
		t.Errorf("two requests at once sampled twice: %+v, %+v", a.Tasks, b.Tasks)
	}
	clock.Lock()
	now = now.Add(MinInterval + 20*time.Millisecond)
	clock.Unlock()
	if c := get(); c.Tasks.Done != 2 || c.Tasks.IntervalS < MinInterval.Seconds() {
		t.Errorf("after MinInterval: %+v, want a new sample and its interval", c.Tasks)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := http.Get("http://" + s.Addr() + "/api/snapshot"); err == nil {
		t.Error("answers after Close")
	}
}

func TestListenErrors(t *testing.T) {
	busy, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close(context.Background())
	for _, c := range []struct{ addr, want string }{
		{"", "missing port"},
		{"127.0.0.1", "missing port"},
		{"127.0.0.1:99999", "not a number from 0 to 65535"},
		{busy.Addr(), "address already in use"},
	} {
		if s, err := Listen(c.addr); err == nil {
			s.Close(context.Background())
			t.Errorf("Listen(%q) succeeded", c.addr)
		} else if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"`+c.addr+`"`) {
			t.Errorf("Listen(%q): %v; want %q and the address", c.addr, err, c.want)
		}
	}
}

// With no host the server binds loopback; a request naming another host
// (DNS rebinding) is refused; with a token, only requests carrying it are
// answered, and the page's own requests carry it as a cookie.
func TestGuard(t *testing.T) {
	s, err := Listen(":0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if host, _, _ := net.SplitHostPort(s.Addr()); host != "127.0.0.1" || s.Exposed() {
		t.Fatalf("Listen(\":0\") bound %s (exposed %v), want 127.0.0.1", s.Addr(), s.Exposed())
	}
	s.SetToken("s3cret")
	s.Serve(func(context.Context) Snapshot { return Snapshot{Engine: "ok"} }, nil)
	get := func(path, host string, hdr map[string]string, cookies ...*http.Cookie) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+s.Addr()+path, nil)
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, c := range []struct {
		name, path, host string
		hdr              map[string]string
		want             int
	}{
		{"another host", "/api/snapshot?token=s3cret", "rebind.example:8090", nil, http.StatusForbidden},
		{"no token", "/api/snapshot", "", nil, http.StatusUnauthorized},
		{"wrong token", "/api/snapshot?token=nope", "", nil, http.StatusUnauthorized},
		{"bearer", "/api/snapshot", "localhost:1", map[string]string{"Authorization": "Bearer s3cret"}, http.StatusOK},
		{"query", "/?token=s3cret", "", nil, http.StatusOK},
	} {
		if got := get(c.path, c.host, c.hdr).StatusCode; got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
	page := get("/?token=s3cret", "", nil)
	var cookie *http.Cookie
	for _, ck := range page.Cookies() {
		cookie = ck
	}
	if cookie == nil {
		t.Fatal("the page opened with the token set no cookie")
	}
	if got := get("/api/snapshot", "[::1]:9", nil, cookie).StatusCode; got != http.StatusOK {
		t.Errorf("the page's own request with the cookie: status %d", got)
	}
}

package config

import (
	"strings"
	"testing"
)

// TestDashboardAddr: the dashboard's address from the file and the
// environment, the environment winning; a malformed one is an error naming
// where it came from.
func TestDashboardAddr(t *testing.T) {
	for _, c := range []struct {
		name, file, env string
		want, wantErr   string
	}{
		{name: "unset"},
		{name: "file", file: `dashboard = "127.0.0.1:8090"`, want: "127.0.0.1:8090"},
		{name: "environment", env: ":0", want: ":0"},
		{name: "environment over file", file: `dashboard = "127.0.0.1:8090"`, env: "localhost:0", want: "localhost:0"},
		{name: "ipv6", env: "[::1]:8090", want: "[::1]:8090"},
		{name: "file without port", file: `dashboard = "127.0.0.1"`, wantErr: `"dashboard"`},
		{name: "file empty", file: `dashboard = ""`, wantErr: "must not be empty"},
		{name: "file not a string", file: `dashboard = 8090`, wantErr: `"dashboard"`},
		{name: "environment port out of range", env: "127.0.0.1:65536", wantErr: "STARPU_DASHBOARD"},
		{name: "environment named port", env: "127.0.0.1:http", wantErr: "not a number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			err := cfg.Decode([]byte(c.file), "test.hcl")
			if err == nil {
				err = cfg.ApplyEnv(func(k string) string {
					if k == EnvDashboard {
						return c.env
					}
					return ""
				})
			}
			if err == nil {
				err = cfg.Validate()
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Dashboard != c.want {
				t.Errorf("Dashboard = %q, want %q", cfg.Dashboard, c.want)
			}
		})
	}
	bad := Default()
	bad.Dashboard = "nowhere"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "dashboard") {
		t.Errorf("Validate with dashboard %q: %v", bad.Dashboard, err)
	}
}

package core

import (
	"context"

	"github.com/starpu-go/starpu/core/internal/dashboard"
)

// SampleDashboard takes one dashboard snapshot, as a request to
// /api/snapshot does past the server's sharing, for core_test's benchmarks.
func (rt *Runtime) SampleDashboard(ctx context.Context) dashboard.Snapshot {
	return rt.dashboardSnapshot(ctx)
}

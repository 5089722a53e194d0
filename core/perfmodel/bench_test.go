package perfmodel

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchModel returns a calibrated model of kind with 16 footprints on two
// architectures.
func benchModel(b *testing.B, kind Kind) *Model {
	b.Setenv("STARPU_HOSTNAME", testHost)
	db, err := Open(b.TempDir(), 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	m := db.Model("bench", kind)
	sizes := make([]uint64, 16)
	for i := range sizes {
		sizes[i] = 1 << (8 + i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	synth(m, "cpu", sizes, MinSamples, 1e-3, 1.3, 500, 0.05, rng)
	synth(m, "opencl_0", sizes, MinSamples, 1e-4, 1.3, 8000, 0.05, rng)
	return m
}

// BenchmarkPredict measures the per-submission lookup, on one goroutine and
// on all of them at once.
func BenchmarkPredict(b *testing.B) {
	for _, kind := range []Kind{History, Regression, NonLinearRegression} {
		m := benchModel(b, kind)
		const size = 1 << 12
		if _, ok := m.Predict("opencl_0", size, size); !ok {
			b.Fatalf("%v model not calibrated", kind)
		}
		b.Run(kind.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.Predict("opencl_0", size, size)
			}
		})
		b.Run(kind.String()+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					m.Predict("opencl_0", size, size)
				}
			})
		})
	}
}

// BenchmarkRecord measures the per-completion update of a known entry.
func BenchmarkRecord(b *testing.B) {
	for _, kind := range []Kind{History, Regression, NonLinearRegression} {
		m := benchModel(b, kind)
		b.Run(kind.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.Record("cpu", 1<<12, 1<<12, 5000)
			}
		})
	}
}

// BenchmarkRefitNL measures one non-linear fit over F entries, the
// occasional cost Record pays for NonLinearRegression models.
func BenchmarkRefitNL(b *testing.B) {
	for _, f := range []int{4, 16, 256} {
		pts := make([]point, f)
		for i := range pts {
			x := float64(uint64(1) << (8 + i%24))
			x *= 1 + float64(i/24)/8
			pts[i] = newPoint(x, 2*x+5000)
		}
		b.Run(fmt.Sprintf("points=%d", f), func(b *testing.B) {
			for b.Loop() {
				if _, _, _, ok := fitNonLinear(pts); !ok {
					b.Fatal("no fit")
				}
			}
		})
	}
}

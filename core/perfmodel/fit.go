package perfmodel

import "math"

// regSums are the running sums of the log-log least-squares fit of
// duration = a*size^b over every sample, StarPU's
// starpu_perfmodel_regression_model: with X = ln size and Y = ln duration,
// b = (n*Sxy - Sx*Sy) / (n*Sxx - Sx^2) and ln a = (Sy - b*Sx) / n.
type regSums struct {
	n                uint64
	sx, sxx, sy, sxy float64
	minSize, maxSize uint64
}

func (r *regSums) add(size, ns float64, isize uint64) {
	x, y := math.Log(size), math.Log(ns)
	r.n++
	r.sx += x
	r.sxx += x * x
	r.sy += y
	r.sxy += x * y
	if r.n == 1 || isize < r.minSize {
		r.minSize = isize
	}
	if isize > r.maxSize {
		r.maxSize = isize
	}
}

// solve returns ln a and b from the sums; ok when calibrated: MinSamples
// samples over at least two distinct sizes. It skips the exponential so
// that Record can publish a regression cheaply.
func (r *regSums) solve() (lnA, b float64, ok bool) {
	if r.n < 2 || r.minSize == r.maxSize {
		return 0, 0, false
	}
	n := float64(r.n)
	den := n*r.sxx - r.sx*r.sx
	if den <= 0 {
		return 0, 0, false
	}
	b = (n*r.sxy - r.sx*r.sy) / den
	lnA = (r.sy - b*r.sx) / n
	return lnA, b, r.n >= MinSamples && finite(lnA) && finite(b)
}

// fit returns the solved regression for display.
func (r *regSums) fit() Fit {
	f := Fit{Samples: r.n, MinSize: r.minSize, MaxSize: r.maxSize}
	lnA, b, ok := r.solve()
	if lnA != 0 || b != 0 {
		f.A, f.B = math.Exp(lnA), b
	}
	f.Calibrated = ok
	return f
}

// point is one (size, mean duration) pair of the non-linear fit, with
// lx = ln x computed once.
type point struct{ x, y, lx float64 }

func newPoint(x, y float64) point { return point{x: x, y: y, lx: math.Log(x)} }

// fitPower fits y - c = a*x^b by least squares on (ln x, ln(y-c)). It fails
// when fewer than two distinct x remain or some y <= c.
func fitPower(pts []point, c float64) (a, b float64, ok bool) {
	var sx, sxx, sy, sxy float64
	for _, p := range pts {
		if p.y <= c {
			return 0, 0, false
		}
		x, y := p.lx, math.Log(p.y-c)
		sx += x
		sxx += x * x
		sy += y
		sxy += x * y
	}
	n := float64(len(pts))
	den := n*sxx - sx*sx
	if len(pts) < 2 || den <= 1e-12*n*sxx {
		return 0, 0, false
	}
	b = (n*sxy - sx*sy) / den
	a = math.Exp((sy - b*sx) / n)
	return a, b, !math.IsInf(a, 0) && !math.IsNaN(a) && !math.IsNaN(b)
}

// relErr is the sum of squared relative errors of a*x^b + c over pts: each
// size weighs the same whatever its duration, which is what a scheduler
// comparing architectures needs when sizes span decades.
func relErr(pts []point, a, b, c float64) float64 {
	var s float64
	for _, p := range pts {
		r := (a*math.Exp(b*p.lx) + c - p.y) / p.y
		s += r * r
	}
	return s
}

// fitNonLinear fits y = a*x^b + c with 0 <= c < min y. For a given c, a and
// b follow from the log-log fit of y - c (fitPower); c is the one value left
// to choose, so it is picked by minimising the squared relative error over
// c: a scan of [0, min y) in 16 steps, then a golden-section search around
// the best step. That gives the start of a Levenberg-Marquardt descent on
// all three parameters (refine). With two distinct sizes every c fits
// exactly, so c is 0 and the model degenerates to a*x^b.
func fitNonLinear(pts []point) (a, b, c float64, ok bool) {
	distinct := map[float64]bool{}
	ymin := math.Inf(1)
	for _, p := range pts {
		ymin = min(ymin, p.y)
		distinct[p.x] = true
	}
	switch len(distinct) {
	case 0, 1:
		return 0, 0, 0, false
	case 2:
		a, b, ok = fitPower(pts, 0)
		return a, b, 0, ok
	}
	cost := func(c float64) float64 {
		a, b, ok := fitPower(pts, c)
		if !ok {
			return math.Inf(1)
		}
		return relErr(pts, a, b, c)
	}
	const steps = 16
	hi := ymin * (1 - 1e-9)
	best, bestCost := 0.0, cost(0)
	for i := 1; i < steps; i++ {
		ci := hi * float64(i) / steps
		if v := cost(ci); v < bestCost {
			best, bestCost = ci, v
		}
	}
	if math.IsInf(bestCost, 1) {
		return 0, 0, 0, false
	}
	// Golden section on [best - step, best + step], clamped.
	lo, up := max(0, best-hi/steps), min(hi, best+hi/steps)
	const g = 0.6180339887498949
	x1, x2 := up-g*(up-lo), lo+g*(up-lo)
	f1, f2 := cost(x1), cost(x2)
	for i := 0; i < 100 && up-lo > 1e-4*hi; i++ {
		if f1 < f2 {
			up, x2, f2 = x2, x1, f1
			x1 = up - g*(up-lo)
			f1 = cost(x1)
		} else {
			lo, x1, f1 = x1, x2, f2
			x2 = lo + g*(up-lo)
			f2 = cost(x2)
		}
	}
	if f1 < bestCost {
		best, bestCost = x1, f1
	}
	if f2 < bestCost {
		best = x2
	}
	a, b, ok = fitPower(pts, best)
	if !ok {
		return 0, 0, 0, false
	}
	a, b, c = refine(pts, a, b, best)
	return a, b, c, true
}

// refine improves a start (a, b, c) by Levenberg-Marquardt on the relative
// residuals (a*x^b + c - y)/y, with a = exp(alpha) kept positive and c kept
// at 0 or above. The start matters: the log-log fit of y - c behind it
// weighs the points where y is close to c far too much (their log is
// dominated by noise), which this step corrects.
func refine(pts []point, a, b, c float64) (float64, float64, float64) {
	alpha := math.Log(a)
	cur := relErr(pts, a, b, c)
	lambda := 1e-3
	for range 100 {
		var jtj [3][3]float64
		var jtr [3]float64
		for _, p := range pts {
			t := math.Exp(alpha + b*p.lx)
			r := (t + c - p.y) / p.y
			j := [3]float64{t / p.y, t * p.lx / p.y, 1 / p.y}
			for i := range 3 {
				jtr[i] -= j[i] * r
				for k := range 3 {
					jtj[i][k] += j[i] * j[k]
				}
			}
		}
		improved := false
		for lambda < 1e6 {
			m := jtj
			for i := range 3 {
				m[i][i] *= 1 + lambda
			}
			d, ok := solve3(m, jtr)
			if ok {
				na, nb, nc := alpha+d[0], b+d[1], max(0, c+d[2])
				if e := relErr(pts, math.Exp(na), nb, nc); e < cur {
					done := cur-e <= 1e-12*cur
					alpha, b, c, cur = na, nb, nc, e
					lambda = max(lambda/10, 1e-12)
					improved = !done
					break
				}
			}
			lambda *= 10
		}
		if !improved || cur < 1e-20 {
			break
		}
	}
	return math.Exp(alpha), b, c
}

// solve3 solves m x = v by Gaussian elimination with partial pivoting.
func solve3(m [3][3]float64, v [3]float64) ([3]float64, bool) {
	for col := range 3 {
		p := col
		for r := col + 1; r < 3; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[p][col]) {
				p = r
			}
		}
		if m[p][col] == 0 || !finite(m[p][col]) {
			return v, false
		}
		m[col], m[p] = m[p], m[col]
		v[col], v[p] = v[p], v[col]
		for r := col + 1; r < 3; r++ {
			f := m[r][col] / m[col][col]
			for k := col; k < 3; k++ {
				m[r][k] -= f * m[col][k]
			}
			v[r] -= f * v[col]
		}
	}
	var x [3]float64
	for r := 2; r >= 0; r-- {
		s := v[r]
		for k := r + 1; k < 3; k++ {
			s -= m[r][k] * x[k]
		}
		x[r] = s / m[r][r]
	}
	return x, finite(x[0]) && finite(x[1]) && finite(x[2])
}

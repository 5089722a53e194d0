package trace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Multi-rank traces.
//
// Under mpirun every rank writes its own file, run.rank<N>.trace for
// run.trace (core/task_trace.go, rankPath), as StarPU's FxT traces do.
// ReadFile given the base name merges them: one time axis (each rank's
// times are shifted by the difference of its Origin, the wall clock of its
// time 0, from the earliest), the rows of each rank together and named
// after it, and task, handle and node numbers made distinct per rank.
// Rejected: merging while recording (the ranks would have to ship their
// records to one writer during the run, a cost paid by every traced run
// for a view wanted after it).

// rankShift keeps the task and handle numbers of the ranks of a merged
// trace apart: rank r's are offset by r<<rankShift. A run numbers far
// fewer than 2^40 tasks.
const rankShift = 40

// RankFiles lists the files of the multi-rank trace whose base name is
// path (run.trace: run.rank0.trace, run.rank1.trace, ...), by rank; nil
// when there are none.
func RankFiles(path string) ([]string, error) {
	ext := filepath.Ext(path)
	base := strings.TrimSuffix(path, ext)
	matches, err := filepath.Glob(globEscape(base) + ".rank*" + globEscape(ext))
	if err != nil {
		return nil, err
	}
	type rf struct {
		rank int
		path string
	}
	var rs []rf
	for _, m := range matches {
		s := strings.TrimSuffix(strings.TrimPrefix(m, base+".rank"), ext)
		if r, err := strconv.Atoi(s); err == nil && r >= 0 && strconv.Itoa(r) == s {
			rs = append(rs, rf{r, m})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].rank < rs[j].rank })
	var out []string
	for i, r := range rs {
		if r.rank != i {
			return nil, fmt.Errorf("trace %s: rank files %s: rank %d's is missing", path, strings.Join(paths(rs[:i+1], func(x rf) string { return x.path }), ", "), i)
		}
		out = append(out, r.path)
	}
	return out, nil
}

func paths[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// globEscape quotes the metacharacters of a path for filepath.Glob.
func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// readRanks reads and merges the rank files of the trace path names, or,
// when it has none, returns openErr, the failure to open path, saying so.
func readRanks(path string, openErr error) (*Trace, error) {
	files, err := RankFiles(path)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w (nor rank files %s.rank0%s, ... of an MPI run)", openErr, strings.TrimSuffix(path, filepath.Ext(path)), filepath.Ext(path))
	}
	ranks := make([]*Trace, len(files))
	for i, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		ranks[i], err = Read(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return Merge(ranks)
}

// multiRank reports whether t merges the traces of several ranks: some
// communication was recorded by a rank other than 0.
func (t *Trace) multiRank() bool {
	for _, c := range t.Comms {
		if c.Rank != 0 {
			return true
		}
	}
	return false
}

// Merge makes one trace of the traces of the ranks of an MPI run, rank i
// being ranks[i]. Their Origins set the time axis: a rank without one
// cannot be placed, which is an error.
func Merge(ranks []*Trace) (*Trace, error) {
	if len(ranks) == 0 {
		return nil, errors.New("trace: no rank to merge")
	}
	origin := int64(0)
	for i, t := range ranks {
		if t.Origin == 0 {
			return nil, fmt.Errorf("trace: rank %d's trace does not say when it started: its times cannot be put beside the others'", i)
		}
		if origin == 0 || t.Origin < origin {
			origin = t.Origin
		}
	}
	m := &Trace{Origin: origin, Complete: true, Format: ranks[0].Format}
	for r, t := range ranks {
		d := t.Origin - origin
		at := func(x int64) int64 {
			if x == 0 {
				return 0 // unknown stays unknown
			}
			return x + d
		}
		id := func(x uint64) uint64 { return x | uint64(r)<<rankShift }
		w0, n0 := len(m.Workers), len(m.Nodes)
		for _, w := range t.Workers {
			m.Workers = append(m.Workers, Worker{ID: w.ID + w0, Name: fmt.Sprintf("rank %d %s", r, w.Name), Node: w.Node + n0, Arch: w.Arch})
		}
		for _, n := range t.Nodes {
			m.Nodes = append(m.Nodes, Node{ID: n.ID + n0, Name: fmt.Sprintf("rank %d %s", r, n.Name)})
		}
		for _, x := range t.Tasks {
			c := *x
			c.ID = id(x.ID)
			c.Submit, c.Ready, c.Start, c.End = at(x.Submit), at(x.Ready), at(x.Start), at(x.End)
			c.SleepStart, c.SleepEnd = at(x.SleepStart), at(x.SleepEnd)
			if x.Worker >= 0 {
				c.Worker = x.Worker + w0
			}
			c.Preds = make([]uint64, len(x.Preds))
			for i, p := range x.Preds {
				c.Preds[i] = id(p)
			}
			c.Handles = make([]Access, len(x.Handles))
			for i, a := range x.Handles {
				a.Handle = id(a.Handle)
				c.Handles[i] = a
			}
			if x.Team != nil {
				c.Team = make([]int, len(x.Team))
				for i, w := range x.Team {
					c.Team[i] = w + w0
				}
			}
			m.Tasks = append(m.Tasks, &c)
		}
		for _, x := range t.Transfers {
			x.Src, x.Dst, x.Handle, x.Start, x.End = x.Src+n0, x.Dst+n0, id(x.Handle), at(x.Start), at(x.End)
			m.Transfers = append(m.Transfers, x)
		}
		for _, s := range t.States {
			s.Worker, s.Start, s.End = s.Worker+w0, at(s.Start), at(s.End)
			if s.Task != 0 {
				s.Task = id(s.Task)
			}
			m.States = append(m.States, s)
		}
		for _, p := range t.Plugins {
			p.Time, p.Name = at(p.Time), fmt.Sprintf("rank %d %s", r, p.Name)
			m.Plugins = append(m.Plugins, p)
		}
		for _, c := range t.Comms {
			c.Rank, c.Start, c.End = r, at(c.Start), at(c.End)
			if c.Handle != 0 {
				c.Handle = id(c.Handle)
			}
			m.Comms = append(m.Comms, c)
		}
		m.Complete = m.Complete && t.Complete
	}
	return m, nil
}

package cudadriver

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/driver/drivertest"
	"github.com/starpu-go/starpu/pluginapi/wire"
	"github.com/starpu-go/starpu/plugins/driver-cuda/cu"
)

// fakeLog is where the fake libcuda of a test appends the calls that hold
// or move device memory (CUDA_FAKE_LOG, see cu/testdata/fakecuda.c), and
// the environment that selects it with n fake GPUs; "" and no variables on
// a real GPU.
func fakeLog(t *testing.T, n int) (string, []string) {
	if backend != "fake" {
		return "", nil
	}
	path := filepath.Join(t.TempDir(), "fakecuda.log")
	return path, []string{"CUDA_FAKE_LOG=" + path, fmt.Sprintf("CUDA_FAKE_DEVICES=%d", n)}
}

// fakeCalls are the lines of a fake libcuda log whose first word is one
// of kinds.
func fakeCalls(t *testing.T, path string, kinds ...string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if w, _, _ := strings.Cut(l, " "); l != "" && slices.Contains(kinds, w) {
			out = append(out, l)
		}
	}
	return out
}

// peerCases are the ways two GPUs may stand to each other: with peer
// access, with it turned off, and without it (the fake's setting).
var peerCases = []struct {
	name string
	env  []string
	peer bool
}{
	{"peer access", nil, true},
	{"turned off", []string{EnvGPUDirect + "=0"}, false},
	{"not supported", []string{"CUDA_FAKE_PEER=0"}, false},
}

// TestPeerCopies: with two GPUs that can access each other's memory, each
// node names the other as its peer, and a Copy from one GPU's buffer to
// the other's, sent to the source's worker, is one cuMemcpyPeerAsync per
// range; a copy sent to the destination's worker, naming a buffer the
// peer does not hold (never allocated or freed) or bytes outside it, is
// refused. With peer access turned off (STARPU_ENABLE_CUDA_GPU_GPU_DIRECT=0)
// or missing (the fake's CUDA_FAKE_PEER=0) there are no peers, and such a
// copy is refused as naming a node the worker cannot reach.
func TestPeerCopies(t *testing.T) {
	for _, tc := range peerCases {
		for _, md := range modes {
			t.Run(tc.name+"/"+md.name, func(t *testing.T) {
				need(t)
				log, env := fakeLog(t, 2)
				if backend == "gpu" {
					if slices.Contains(tc.env, "CUDA_FAKE_PEER=0") {
						t.Skip("the fake's setting")
					}
					if m, err := cu.Probe(cu.Config{}); err != nil || len(m.Devices) < 2 {
						t.Skip("needs two GPUs")
					}
				}
				r := drivertest.Start(t, md.start, drivertest.Env(append(env, tc.env...)...), drivertest.Workers(2), drivertest.Timeout(time.Minute))
				w0, w1 := r.W(0), r.W(1)
				var want [][]int
				if tc.peer {
					want = [][]int{{2}, {1}}
				} else {
					want = [][]int{nil, nil}
				}
				if got := [][]int{r.FP.Nodes[0].Peers, r.FP.Nodes[1].Peers}; !reflect.DeepEqual(got, want) {
					if backend == "gpu" && tc.peer {
						t.Skipf("these GPUs have no peer access (peers %v)", got)
					}
					t.Fatalf("peers %v, want %v", got, want)
				}
				const n = 1 << 16
				in, out := r.RAM(n), r.RAM(n)
				for i := range r.Bytes(in) {
					r.Bytes(in)[i] = byte(i*7 + 3)
				}
				a, b := r.Buffer(), r.Buffer()
				r.OK(w0.Alloc(a, n), w1.Alloc(b, n))
				r.OK(w0.Up(in, a))
				// Two ranges, swapping the halves.
				peer := w0.Copy(1, 2, a, b, wire.CopyRange{SrcOffset: n / 2, DstOffset: 0, Len: n / 2}, wire.CopyRange{SrcOffset: 0, DstOffset: n / 2, Len: n / 2})
				if !tc.peer {
					if msg := r.Failed(peer); !strings.Contains(msg, "node 2 is neither RAM (0) nor this worker's GPU (1)") {
						t.Errorf("copy to a GPU without peer access: %q", msg)
					}
					return
				}
				r.OK(peer)
				r.OK(w1.Down(b, out))
				wantOut := append(append([]byte(nil), r.Bytes(in)[n/2:]...), r.Bytes(in)[:n/2]...)
				if !bytes.Equal(r.Bytes(out), wantOut) {
					t.Errorf("the peer copy did not carry the data")
				}
				if log != "" {
					if got := fakeCalls(t, log, "peer"); !reflect.DeepEqual(got, []string{"peer 0 1 32768", "peer 0 1 32768"}) {
						t.Errorf("fake libcuda saw peer copies %q, want two of 32768 bytes from GPU 0 to GPU 1", got)
					}
				}
				for _, c := range []struct {
					what string
					id   func() uint64
					want string
				}{
					{"sent to the destination's worker", func() uint64 { return w1.Copy(1, 2, a, b, wire.CopyRange{Len: 8}) },
						"a copy between two GPUs goes to the source's worker (node 1), not this one (node 2)"},
					{"never allocated", func() uint64 { return w0.Copy(1, 2, a, r.Buffer(), wire.CopyRange{Len: 8}) },
						"is not allocated on node 2"},
					{"outside the buffer", func() uint64 { return w0.Copy(1, 2, a, b, wire.CopyRange{DstOffset: n - 4, Len: 8}) },
						fmt.Sprintf("range [%d, +8) outside device buffer %d of %d bytes", n-4, b, n)},
					{"freed", func() uint64 {
						// The Alloc behind the Free on w1's ring says it was taken.
						w1.Free(b)
						r.OK(w1.Alloc(r.Buffer(), 8))
						return w0.Copy(1, 2, a, b, wire.CopyRange{Len: 8})
					},
						fmt.Sprintf("device buffer %d is not allocated on node 2", b)},
				} {
					if msg := r.Failed(c.id()); !strings.Contains(msg, c.want) {
						t.Errorf("%s: %q, want %q", c.what, msg, c.want)
					}
				}
			})
		}
	}
}

//go:build cgo && !nompi

package mpib

// The C side: thin wrappers that hide OpenMPI's macros (MPI_COMM_WORLD,
// MPI_BYTE, MPI_SUM, ... are addresses of globals, which cgo cannot
// name) and keep each MPI call one cgo call. Only the progression
// goroutine (progress.go) calls them.

/*
#cgo pkg-config: ompi-c
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

static int mpib_initialized(int *flag) { return MPI_Initialized(flag); }
static int mpib_finalized(int *flag) { return MPI_Finalized(flag); }

static int mpib_init(int required, int *provided) {
	int rc = MPI_Init_thread(NULL, NULL, required, provided);
	if (rc != MPI_SUCCESS) return rc;
	// Errors come back as codes: a failed call must not abort the job
	// behind the runtime's back.
	return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

static int mpib_rank_size(int *rank, int *size, int *tagub) {
	int rc = MPI_Comm_rank(MPI_COMM_WORLD, rank);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_size(MPI_COMM_WORLD, size);
	if (rc != MPI_SUCCESS) return rc;
	int *ub, flag = 0;
	rc = MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
	if (rc != MPI_SUCCESS) return rc;
	*tagub = flag ? *ub : 32767;
	return MPI_SUCCESS;
}

static int mpib_isend(void *buf, int n, int dest, int tag, MPI_Request *req) {
	return MPI_Isend(buf, n, MPI_BYTE, dest, tag, MPI_COMM_WORLD, req);
}

static int mpib_irecv(void *buf, int n, int src, int tag, MPI_Request *req) {
	return MPI_Irecv(buf, n, MPI_BYTE, src, tag, MPI_COMM_WORLD, req);
}

// mpib_isendv and mpib_irecvv move the n runs (offset, length) of buf
// as one message, through an hindexed datatype freed once the request is
// started (MPI keeps it until the request completes).
static int mpib_runs_type(int n, const long long *off, const int *len, MPI_Datatype *t) {
	MPI_Aint *d = malloc(n * sizeof(MPI_Aint));
	if (d == NULL) return MPI_ERR_NO_MEM;
	for (int i = 0; i < n; i++) d[i] = (MPI_Aint)off[i];
	int rc = MPI_Type_create_hindexed(n, len, d, MPI_BYTE, t);
	free(d);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Type_commit(t);
}

static int mpib_isendv(void *buf, int n, const long long *off, const int *len, int dest, int tag, MPI_Request *req) {
	MPI_Datatype t;
	int rc = mpib_runs_type(n, off, len, &t);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Isend(buf, 1, t, dest, tag, MPI_COMM_WORLD, req);
	MPI_Type_free(&t);
	return rc;
}

static int mpib_irecvv(void *buf, int n, const long long *off, const int *len, int src, int tag, MPI_Request *req) {
	MPI_Datatype t;
	int rc = mpib_runs_type(n, off, len, &t);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Irecv(buf, 1, t, src, tag, MPI_COMM_WORLD, req);
	MPI_Type_free(&t);
	return rc;
}

static int mpib_ibarrier(MPI_Request *req) { return MPI_Ibarrier(MPI_COMM_WORLD, req); }

// op: 0 sum, 1 max, 2 min.
static int mpib_iallreduce(const long long *in, long long *out, int n, int op, MPI_Request *req) {
	MPI_Op o = op == 1 ? MPI_MAX : op == 2 ? MPI_MIN : MPI_SUM;
	return MPI_Iallreduce(in, out, n, MPI_LONG_LONG, o, MPI_COMM_WORLD, req);
}

static int mpib_iallgather(const void *in, void *out, int n, MPI_Request *req) {
	return MPI_Iallgather(in, n, MPI_BYTE, out, n, MPI_BYTE, MPI_COMM_WORLD, req);
}

static int mpib_iprobe(int src, int tag, int *flag, int *osrc, int *otag, int *count) {
	MPI_Status st;
	int rc = MPI_Iprobe(src, tag, MPI_COMM_WORLD, flag, &st);
	if (rc != MPI_SUCCESS || !*flag) return rc;
	*osrc = st.MPI_SOURCE;
	*otag = st.MPI_TAG;
	return MPI_Get_count(&st, MPI_BYTE, count);
}

// mpib_testsome tests reqs[0:n]; for each completed one, idx gives its
// index and src, tag, count, err and cancelled its status.
static int mpib_testsome(int n, MPI_Request *reqs, int *out, int *idx, MPI_Status *st,
		int *src, int *tag, int *count, int *err, int *cancelled) {
	int rc = MPI_Testsome(n, reqs, out, idx, st);
	if (*out == MPI_UNDEFINED) *out = 0;
	for (int i = 0; i < *out; i++) {
		src[i] = st[i].MPI_SOURCE;
		tag[i] = st[i].MPI_TAG;
		err[i] = rc == MPI_ERR_IN_STATUS ? st[i].MPI_ERROR : MPI_SUCCESS;
		count[i] = 0;
		MPI_Get_count(&st[i], MPI_BYTE, &count[i]);
		if (count[i] == MPI_UNDEFINED) count[i] = 0;
		cancelled[i] = 0;
		MPI_Test_cancelled(&st[i], &cancelled[i]);
	}
	return rc == MPI_ERR_IN_STATUS ? MPI_SUCCESS : rc;
}

static int mpib_cancel(MPI_Request *req) { return MPI_Cancel(req); }

static int mpib_abort(int code) { return MPI_Abort(MPI_COMM_WORLD, code); }

static int mpib_finalize(void) { return MPI_Finalize(); }

static void mpib_error_string(int code, char *buf, int cap) {
	int n = 0;
	buf[0] = 0;
	if (MPI_Error_string(code, buf, &n) != MPI_SUCCESS) n = 0;
	if (n >= cap) n = cap - 1;
	buf[n] = 0;
}

static int mpib_is_truncate(int code) {
	int cls = 0;
	if (MPI_Error_class(code, &cls) != MPI_SUCCESS) return 0;
	return cls == MPI_ERR_TRUNCATE;
}

static size_t mpib_sizeof_request(void) { return sizeof(MPI_Request); }
static size_t mpib_sizeof_status(void) { return sizeof(MPI_Status); }
static int mpib_max_error_string(void) { return MPI_MAX_ERROR_STRING; }
static int mpib_thread_serialized(void) { return MPI_THREAD_SERIALIZED; }
static int mpib_thread_multiple(void) { return MPI_THREAD_MULTIPLE; }
static int mpib_thread_funneled(void) { return MPI_THREAD_FUNNELED; }
*/
import "C"

import (
	"fmt"
	"sort"
	"unsafe"
)

// Built is true when the binding is compiled in (cgo, without the nompi
// tag).
const Built = true

// cRequest is an MPI_Request; the request table holds them in C memory.
type cRequest = C.MPI_Request

// cint is C's int, MPI's return code.
type cint = C.int

// mpiErrorCode is mpiError for code outside this file.
func mpiErrorCode(call string, rc cint) error { return mpiError(call, rc) }

// initMPI initialises MPI on the calling thread and reads the world's
// shape. On error MPI is finalised again when it was initialised.
func (c *Comm) initMPI() error {
	var flag C.int
	if rc := C.mpib_finalized(&flag); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Finalized", rc)
	}
	if flag != 0 {
		return fmt.Errorf("%w: MPI was already finalized in this process: MPI can be initialised once per process", ErrMPI)
	}
	if rc := C.mpib_initialized(&flag); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Initialized", rc)
	}
	if flag != 0 {
		return fmt.Errorf("%w: MPI is already initialised in this process: one Comm per process", ErrMPI)
	}
	var provided C.int
	if rc := C.mpib_init(C.mpib_thread_serialized(), &provided); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Init_thread", rc)
	}
	c.level = threadLevel(provided)
	if c.level < ThreadSerialized {
		C.mpib_finalize()
		return fmt.Errorf("%w: MPI provides %s, the runtime needs %s or better (OpenMPI built without thread support?)", ErrThreadLevel, c.level, ThreadSerialized)
	}
	var rank, size, ub C.int
	if rc := C.mpib_rank_size(&rank, &size, &ub); rc != C.MPI_SUCCESS {
		C.mpib_finalize()
		return mpiError("MPI_Comm_rank", rc)
	}
	c.rank, c.size, c.tagUB = int(rank), int(size), int(ub)
	return nil
}

func isend(buf unsafe.Pointer, n, dest, tag int, q *cRequest) C.int {
	return C.mpib_isend(buf, C.int(n), C.int(dest), C.int(tag), q)
}

func irecv(buf unsafe.Pointer, n, src, tag int, q *cRequest) C.int {
	return C.mpib_irecv(buf, C.int(n), C.int(src), C.int(tag), q)
}

// runsC copies runs to C arrays for mpib_isendv and mpib_irecvv; free
// releases them.
func runsC(runs []Run) (off *C.longlong, ln *C.int, free func()) {
	n := len(runs)
	off = (*C.longlong)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.longlong(0)))))
	ln = (*C.int)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.int(0)))))
	offs, ls := unsafe.Slice((*int64)(unsafe.Pointer(off)), n), unsafe.Slice((*int32)(unsafe.Pointer(ln)), n)
	for i, r := range runs {
		offs[i], ls[i] = int64(r.Off), int32(r.Len)
	}
	return off, ln, func() { C.free(unsafe.Pointer(off)); C.free(unsafe.Pointer(ln)) }
}

func isendv(buf unsafe.Pointer, runs []Run, dest, tag int, q *cRequest) C.int {
	off, ln, free := runsC(runs)
	defer free()
	return C.mpib_isendv(buf, C.int(len(runs)), off, ln, C.int(dest), C.int(tag), q)
}

func irecvv(buf unsafe.Pointer, runs []Run, src, tag int, q *cRequest) C.int {
	off, ln, free := runsC(runs)
	defer free()
	return C.mpib_irecvv(buf, C.int(len(runs)), off, ln, C.int(src), C.int(tag), q)
}

func ibarrier(q *cRequest) C.int { return C.mpib_ibarrier(q) }

func iprobe(src, tag int) (bool, Status, error) {
	var flag, osrc, otag, count C.int
	if rc := C.mpib_iprobe(C.int(src), C.int(tag), &flag, &osrc, &otag, &count); rc != C.MPI_SUCCESS {
		return false, Status{}, mpiError("MPI_Iprobe", rc)
	}
	if flag == 0 {
		return false, Status{}, nil
	}
	return true, Status{Source: int(osrc), Tag: int(otag), Count: int(count)}, nil
}

func abort(code int) { C.mpib_abort(C.int(code)) }

func finalize() error { return mpiError("MPI_Finalize", C.mpib_finalize()) }

// startAllreduce starts r, an MPI_Iallreduce of in into out, through C
// buffers copied back by r.finish.
func (c *Comm) startAllreduce(r *Request, in, out []int64, op Op) {
	n := len(in)
	sz := C.size_t(n) * C.size_t(unsafe.Sizeof(C.longlong(0)))
	cin, cout := (*C.longlong)(C.malloc(sz)), (*C.longlong)(C.malloc(sz))
	copy(unsafe.Slice((*int64)(unsafe.Pointer(cin)), n), in)
	r.finish = func() {
		copy(out, unsafe.Slice((*int64)(unsafe.Pointer(cout)), n))
		C.free(unsafe.Pointer(cin))
		C.free(unsafe.Pointer(cout))
	}
	c.start(r, func(q *cRequest) C.int { return C.mpib_iallreduce(cin, cout, C.int(n), C.int(op), q) })
}

// startAllgather starts r, an MPI_Iallgather of in into out.
func (c *Comm) startAllgather(r *Request, in, out []byte) {
	cin, cout := C.malloc(C.size_t(len(in))), C.malloc(C.size_t(len(out)))
	copy(unsafe.Slice((*byte)(cin), len(in)), in)
	r.finish = func() {
		copy(out, unsafe.Slice((*byte)(cout), len(out)))
		C.free(cin)
		C.free(cout)
	}
	c.start(r, func(q *cRequest) C.int { return C.mpib_iallgather(cin, cout, C.int(len(in)), q) })
}

// testsome tests the requests in flight (MPI_Testsome) and completes those
// that are over; it returns how many.
func (c *Comm) testsome() int {
	n := len(c.inflight)
	if n == 0 {
		return 0
	}
	t := &c.table
	var out C.int
	rc := C.mpib_testsome(C.int(n), t.reqs, &out, t.idx, t.st, t.src, t.tag, t.count, t.errc, t.cancelled)
	if rc != C.MPI_SUCCESS {
		err := mpiError("MPI_Testsome", rc)
		all := c.inflight
		c.inflight = nil
		for _, r := range all {
			r.slot = -1
			c.complete(r, err)
		}
		return len(all)
	}
	k := int(out)
	if k == 0 {
		return 0
	}
	done := make([]*Request, k)
	slots := make([]int, k)
	for j := 0; j < k; j++ {
		i := intAt(t.idx, j)
		r := c.inflight[i]
		r.st = Status{Source: intAt(t.src, j), Tag: intAt(t.tag, j), Count: intAt(t.count, j), Cancelled: intAt(t.cancelled, j) != 0}
		var err error
		if e := intAt(t.errc, j); e != 0 {
			err = fmt.Errorf("%s: %w", r, mpiError("request", C.int(e)))
		} else if r.st.Cancelled {
			err = fmt.Errorf("%s: %w", r, ErrCancelled)
		}
		r.err = err
		done[j], slots[j] = r, i
	}
	// Remove from the highest slot down, moving the last request into
	// each hole.
	sort.Sort(sort.Reverse(sort.IntSlice(slots)))
	for _, i := range slots {
		last := len(c.inflight) - 1
		if i != last {
			*t.reqAt(i) = *t.reqAt(last)
			c.inflight[i] = c.inflight[last]
			c.inflight[i].slot = i
		}
		c.inflight[last] = nil
		c.inflight = c.inflight[:last]
	}
	for _, r := range done {
		r.slot = -1
		c.complete(r, r.err)
	}
	return k
}

// cancel asks MPI to cancel r, in flight, once: OpenMPI 4.1's ob1
// crashes on a second MPI_Cancel of a request. Collectives cannot be
// cancelled.
func (c *Comm) cancel(r *Request) {
	if r.slot < 0 || r.cancelled || r.collective() {
		return
	}
	r.cancelled = true
	C.mpib_cancel(c.table.reqAt(r.slot))
}

// mpiError is an MPI error code with its message.
func mpiError(call string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	n := C.mpib_max_error_string()
	buf := (*C.char)(C.malloc(C.size_t(n + 1)))
	defer C.free(unsafe.Pointer(buf))
	C.mpib_error_string(rc, buf, n+1)
	if C.mpib_is_truncate(rc) != 0 {
		return fmt.Errorf("%w: %w: %s: %s (MPI error %d)", ErrMPI, ErrTruncated, call, C.GoString(buf), int(rc))
	}
	return fmt.Errorf("%w: %s: %s (MPI error %d)", ErrMPI, call, C.GoString(buf), int(rc))
}

// threadLevel maps MPI's thread level constants to ThreadLevel.
func threadLevel(p C.int) ThreadLevel {
	switch p {
	case C.mpib_thread_multiple():
		return ThreadMultiple
	case C.mpib_thread_serialized():
		return ThreadSerialized
	case C.mpib_thread_funneled():
		return ThreadFunneled
	}
	return ThreadSingle
}

// reqTable is the C arrays MPI_Testsome works on, grown as needed: the
// requests in flight and the per-completion outputs. Only the progression
// goroutine touches it.
type reqTable struct {
	cap                                   int
	reqs                                  *C.MPI_Request
	st                                    *C.MPI_Status
	idx, src, tag, count, errc, cancelled *C.int
}

func (t *reqTable) grow(n int) {
	if n <= t.cap {
		return
	}
	c := max(n, 2*t.cap, 64)
	old := *t
	t.cap = c
	t.reqs = (*C.MPI_Request)(C.calloc(C.size_t(c), C.mpib_sizeof_request()))
	t.st = (*C.MPI_Status)(C.calloc(C.size_t(c), C.mpib_sizeof_status()))
	ints := func() *C.int { return (*C.int)(C.calloc(C.size_t(c), C.size_t(unsafe.Sizeof(C.int(0))))) }
	t.idx, t.src, t.tag, t.count, t.errc, t.cancelled = ints(), ints(), ints(), ints(), ints(), ints()
	if old.cap > 0 {
		// The requests in flight move with the table.
		C.memcpy(unsafe.Pointer(t.reqs), unsafe.Pointer(old.reqs), C.size_t(old.cap)*C.mpib_sizeof_request())
		old.free()
	}
}

func (t *reqTable) free() {
	for _, p := range []unsafe.Pointer{unsafe.Pointer(t.reqs), unsafe.Pointer(t.st), unsafe.Pointer(t.idx),
		unsafe.Pointer(t.src), unsafe.Pointer(t.tag), unsafe.Pointer(t.count), unsafe.Pointer(t.errc), unsafe.Pointer(t.cancelled)} {
		if p != nil {
			C.free(p)
		}
	}
	*t = reqTable{}
}

func (t *reqTable) reqAt(i int) *C.MPI_Request {
	return (*C.MPI_Request)(unsafe.Add(unsafe.Pointer(t.reqs), uintptr(i)*uintptr(C.mpib_sizeof_request())))
}

func intAt(p *C.int, i int) int {
	return int(*(*C.int)(unsafe.Add(unsafe.Pointer(p), uintptr(i)*unsafe.Sizeof(C.int(0)))))
}

//go:build !cgo || nompi

package mpib

// The binding without MPI: built with CGO_ENABLED=0 or the nompi tag, for
// machines without OpenMPI's headers. Init fails; nothing else is
// reachable.

import (
	"fmt"
	"unsafe"
)

// Built is false: this binary has no MPI.
const Built = false

type cRequest = struct{}

type cint = int32

type reqTable struct{}

func (t *reqTable) grow(int)            {}
func (t *reqTable) free()               {}
func (t *reqTable) reqAt(int) *cRequest { return nil }
func mpiErrorCode(call string, rc cint) error {
	return fmt.Errorf("%w: %s: error %d", ErrMPI, call, rc)
}

func (c *Comm) initMPI() error {
	return fmt.Errorf("%w: this program was built without MPI (CGO_ENABLED=0 or the nompi tag): install libopenmpi-dev and build with cgo", ErrMPI)
}

func isend(unsafe.Pointer, int, int, int, *cRequest) cint    { return 1 }
func irecv(unsafe.Pointer, int, int, int, *cRequest) cint    { return 1 }
func isendv(unsafe.Pointer, []Run, int, int, *cRequest) cint { return 1 }
func irecvv(unsafe.Pointer, []Run, int, int, *cRequest) cint { return 1 }
func ibarrier(*cRequest) cint                                { return 1 }
func iprobe(int, int) (bool, Status, error)                  { return false, Status{}, ErrFinalized }
func abort(int)                                              {}
func finalize() error                                        { return nil }

func (c *Comm) startAllreduce(r *Request, _, _ []int64, _ Op) { c.complete(r, ErrFinalized) }
func (c *Comm) startAllgather(r *Request, _, _ []byte)        { c.complete(r, ErrFinalized) }
func (c *Comm) testsome() int                                 { return 0 }
func (c *Comm) cancel(r *Request)                             { r.cancelled = true }

package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// The cross-process tests re-execute the test binary as a child that runs
// TestHelperProcess in one of the modes below, with the arena's memfd as
// base.ArenaFD, the way a plugin process gets it.
const helperEnv = "STARPU_SHM_TEST_HELPER"

// childWait bounds every wait in a child so that a broken parent cannot
// leave it behind (Pdeathsig covers a dead one).
const childWait = 30 * time.Second

// duplex is a pair of rings and bells: "down" from parent to child, "up"
// back. Its offsets are what a real core would send a plugin in its
// handshake.
type duplex struct {
	downRing, upRing base.Span
	downBell, upBell uint64
}

func (d duplex) args() []uint64 {
	return []uint64{d.downRing.Offset, d.downRing.Size, d.upRing.Offset, d.upRing.Size, d.downBell, d.upBell}
}

func duplexFromArgs(v []uint64) duplex {
	return duplex{
		downRing: base.Span{Offset: v[0], Size: v[1]},
		upRing:   base.Span{Offset: v[2], Size: v[3]},
		downBell: v[4], upBell: v[5],
	}
}

// endpoint is one process's view of a duplex.
type endpoint struct {
	send, recv         *Ring
	sendBell, recvBell *Bell
}

// newDuplex carves and formats a duplex in a (creator side) and returns the
// parent's endpoint.
func newDuplex(t testing.TB, a *Arena, capacity uint64) (duplex, endpoint) {
	t.Helper()
	var d duplex
	var err error
	carve := func(size, align uint64) base.Span {
		s, err := a.Carve(size, align)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	d.downRing = carve(RingBytes(capacity), 64)
	d.upRing = carve(RingBytes(capacity), 64)
	d.downBell = carve(BellSize, 64).Offset
	d.upBell = carve(BellSize, 64).Offset
	var e endpoint
	if e.send, err = InitRing(a.Bytes(d.downRing)); err != nil {
		t.Fatal(err)
	}
	if e.recv, err = InitRing(a.Bytes(d.upRing)); err != nil {
		t.Fatal(err)
	}
	e.sendBell, e.recvBell = a.Bell(d.downBell), a.Bell(d.upBell)
	if e.sendBell == nil || e.recvBell == nil {
		t.Fatal("nil bell")
	}
	return d, e
}

// childEndpoint opens the child's side of d.
func childEndpoint(a *Arena, d duplex) (endpoint, error) {
	var e endpoint
	var err error
	if e.recv, err = OpenRing(a.Bytes(d.downRing)); err != nil {
		return e, err
	}
	if e.send, err = OpenRing(a.Bytes(d.upRing)); err != nil {
		return e, err
	}
	if e.recvBell, err = a.BellChecked(d.downBell); err != nil {
		return e, err
	}
	if e.sendBell, err = a.BellChecked(d.upBell); err != nil {
		return e, err
	}
	return e, nil
}

// child is a running helper process.
type child struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan error
}

// startChild runs the helper in mode with args, handing it a's memfd as fd 3.
func startChild(t testing.TB, a *Arena, mode string, args ...uint64) *child {
	t.Helper()
	strs := make([]string, len(args))
	for i, v := range args {
		strs[i] = strconv.FormatUint(v, 10)
	}
	c := &child{done: make(chan error, 1)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	c.cmd.Env = append(os.Environ(), helperEnv+"="+mode+":"+strings.Join(strs, ","))
	c.cmd.ExtraFiles = []*os.File{a.File()}
	c.cmd.Stderr = &c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", mode, err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// wait waits for the child to exit successfully.
func (c *child) wait(t testing.TB) {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err // for Cleanup
		if err != nil {
			t.Fatalf("helper failed: %v\n%s", err, c.stderr.String())
		}
	case <-time.After(childWait):
		t.Fatalf("helper did not exit\n%s", c.stderr.String())
	}
}

// alive reports whether the child is still running; parent waits use it to
// stop early with the child's stderr rather than time out.
func (c *child) alive() bool {
	select {
	case err := <-c.done:
		c.done <- err
		return false
	default:
		return true
	}
}

// TestHelperProcess is not a test: it is the child side of the
// cross-process tests and benchmarks, and skips unless run as one.
func TestHelperProcess(t *testing.T) {
	spec, ok := os.LookupEnv(helperEnv)
	if !ok {
		t.Skip("helper process for the cross-process tests")
	}
	if err := runHelper(spec); err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", spec, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runHelper(spec string) error {
	mode, argStr, _ := strings.Cut(spec, ":")
	var args []uint64
	if argStr != "" {
		for _, s := range strings.Split(argStr, ",") {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return err
			}
			args = append(args, v)
		}
	}
	a, err := Attach(base.ArenaFD)
	if err != nil {
		return err
	}
	defer a.Close()
	switch mode {
	case "arena":
		return helperArena(a, base.Span{Offset: args[0], Size: args[1]}, base.Span{Offset: args[2], Size: args[3]})
	case "ringsum":
		return helperRingSum(a, duplexFromArgs(args), args[6])
	case "pingpong":
		return helperPingPong(a, duplexFromArgs(args), int(args[6]))
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// pattern is the content the arena tests write: parent and child agree on
// it without talking.
func pattern(i int) byte { return byte(i*7 + 1) }

// helperArena checks the parent's pattern in data and writes its complement
// into reply.
func helperArena(a *Arena, data, reply base.Span) error {
	if a.Creator() {
		return fmt.Errorf("attached arena claims to be the creator")
	}
	if _, err := a.Alloc(10); !errors.Is(err, ErrNotCreator) {
		return fmt.Errorf("alloc in child: got %v, want ErrNotCreator", err)
	}
	d, err := a.BytesChecked(data)
	if err != nil {
		return err
	}
	for i, b := range d {
		if b != pattern(i) {
			return fmt.Errorf("data[%d] = %d, want %d", i, b, pattern(i))
		}
	}
	r, err := a.BytesChecked(reply)
	if err != nil {
		return err
	}
	for i := range r {
		r[i] = ^pattern(i)
	}
	return nil
}

// helperRingSum consumes n messages from the down ring, hashing their
// lengths and contents in order, and sends back count and hash.
func helperRingSum(a *Arena, d duplex, n uint64) error {
	e, err := childEndpoint(a, d)
	if err != nil {
		return err
	}
	h := fnv.New64a()
	var lenBuf [4]byte
	for i := uint64(0); i < n; i++ {
		if !e.recvBell.Wait(func() bool { return !e.recv.Empty() }, 100, childWait) {
			return fmt.Errorf("timed out waiting for message %d", i)
		}
		m := e.recv.Peek()
		if m == nil {
			return fmt.Errorf("message %d: Peek nil after Wait (err %v)", i, e.recv.Err())
		}
		binary.LittleEndian.PutUint32(lenBuf[:], uint32(len(m)))
		h.Write(lenBuf[:])
		h.Write(m)
		e.recv.Release()
	}
	out, err := e.send.ReserveWait(16, nil)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(out, n)
	binary.LittleEndian.PutUint64(out[8:], h.Sum64())
	e.send.Commit()
	e.sendBell.Ring()
	return nil
}

// helperPingPong echoes every message of the down ring on the up ring until
// an empty message says stop.
func helperPingPong(a *Arena, d duplex, spin int) error {
	e, err := childEndpoint(a, d)
	if err != nil {
		return err
	}
	ready := func() bool { return !e.recv.Empty() }
	for i := 0; ; i++ {
		if !e.recvBell.Wait(ready, spin, childWait) {
			return fmt.Errorf("round %d: timed out waiting for the ping", i)
		}
		m := e.recv.Peek()
		if m == nil {
			return fmt.Errorf("round %d: Peek nil after Wait (err %v)", i, e.recv.Err())
		}
		if len(m) == 0 {
			e.recv.Release()
			return nil
		}
		out, err := e.send.ReserveWait(len(m), nil)
		if err != nil {
			return err
		}
		copy(out, m)
		e.recv.Release()
		e.send.Commit()
		e.sendBell.Ring()
	}
}

// pingPong runs rounds round trips against a pingpong helper (8-byte
// messages carrying the round number), failing on a lost wake-up or a wrong
// echo.
func pingPong(t testing.TB, e endpoint, c *child, spin, rounds int) {
	ready := func() bool { return !e.recv.Empty() }
	for i := 0; i < rounds; i++ {
		m, err := e.send.ReserveWait(8, c.alive)
		if err != nil {
			t.Fatalf("round %d: %v\n%s", i, err, c.stderr.String())
		}
		binary.LittleEndian.PutUint64(m, uint64(i))
		e.send.Commit()
		e.sendBell.Ring()
		if !e.recvBell.Wait(ready, spin, 10*time.Second) {
			t.Fatalf("round %d: no pong within 10s (lost wake-up?)\n%s", i, c.stderr.String())
		}
		r := e.recv.Peek()
		if len(r) != 8 || binary.LittleEndian.Uint64(r) != uint64(i) {
			t.Fatalf("round %d: pong %x", i, r)
		}
		e.recv.Release()
	}
}

// stopPingPong sends the empty stop message and waits for the child.
func stopPingPong(t testing.TB, e endpoint, c *child) {
	if _, err := e.send.ReserveWait(0, c.alive); err != nil {
		t.Fatal(err)
	}
	e.send.Commit()
	e.sendBell.Ring()
	c.wait(t)
}

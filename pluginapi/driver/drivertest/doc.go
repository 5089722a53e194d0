// Package drivertest is the test kit for device drivers: a Rig that plays
// the core's side of one driver over a real shared-memory arena (dispatch,
// scheduler and completion rings, doorbells, Fingerprint, Init, Deinit),
// and a conformance suite, Run, that checks what every driver owes the
// core. A driver runs in the test's process or as a real plugin process
// started as the runtime starts it; the rig cannot tell the two apart, so
// the same test runs both ways.
//
// A driver author runs the suite from the driver's package, once per way
// of starting it:
//
//	func TestConformance(t *testing.T) {
//		h := drivertest.Harness{
//			OK: func(w *drivertest.Worker) drivertest.Task {
//				s := w.RAM(64) // a vector of 16 float32 in the arena
//				return drivertest.Task{Kernel: w.Kernel("scal_f32"), Arg: scalArg(1),
//					Buffers: []wire.BufferDesc{drivertest.Vec(0, s.Offset, 16, 4, kernel.RW)}}
//			},
//		}
//		t.Run("in-process", func(t *testing.T) {
//			h.Start = drivertest.InProcess(func(a *shm.Arena) driver.Driver { return mydriver.New(a, nil) })
//			drivertest.Run(t, h)
//		})
//		t.Run("plugin", func(t *testing.T) {
//			h.Start = drivertest.Plugin(drivertest.Build(t, "..", t.TempDir(), "mine"))
//			drivertest.Run(t, h)
//		})
//	}
//
// and writes its own tests on the Rig, which does the bookkeeping of
// message IDs and completions:
//
//	r := drivertest.Start(t, drivertest.Plugin(path), drivertest.Env("MY_DRIVER_DEVICES=1"))
//	w := r.W(0) // worker 0, on unit 0
//	s := r.RAM(4096)
//	r.OK(w.Alloc(1, 4096))
//	up := w.Up(s, 1)
//	ex := w.Exec(r.Kernel("scal_f32"), arg, drivertest.Vec(1, 1, 1024, 4, kernel.RW))
//	r.OK(up, ex, w.Down(1, s))
//
// A driver of a device with its own memory gives a kernel whose buffers
// are on the worker's node (Worker.Node), allocated and filled through the
// worker's Alloc and Up; the suite then also checks Alloc, Free and Copy.
package drivertest

package core

import (
	"errors"
	"time"
	"weak"
)

// KillWithCompletionUnread is for the fence test: on the engine goroutine,
// so that nothing reads a completion meanwhile, it calls release (which
// lets the kernel on worker wid end), waits until that worker's completion
// ring holds a message, kills the worker's driver process, waits for it to
// exit and runs the engine's plugin check at once. The core then learns of
// the death with the dead process's last completion unread: the order a
// loaded machine can give, made certain.
func KillWithCompletionUnread(rt *Runtime, wid int, release func() error) error {
	var err error
	rt.engine.sync(func() {
		w := rt.workers[wid]
		if err = release(); err != nil {
			return
		}
		deadline := time.Now().Add(time.Minute)
		for w.completion.Peek() == nil {
			if time.Now().After(deadline) {
				err = errors.New("the worker wrote no completion in a minute")
				return
			}
			time.Sleep(time.Millisecond)
		}
		p, _ := w.drv.current()
		p.KillNow("the fence test")
		for !p.Exited() {
			if time.Now().After(deadline) {
				err = errors.New("the killed driver did not exit in a minute")
				return
			}
			time.Sleep(time.Millisecond)
		}
		rt.engine.checkPlugins()
	})
	return err
}

// JobCollected is for the memory test: it returns a function that reports
// whether t's job (its latest submission) has been garbage collected.
func JobCollected(t *Task) func() bool {
	w := weak.Make(t.job)
	return func() bool { return w.Value() == nil }
}

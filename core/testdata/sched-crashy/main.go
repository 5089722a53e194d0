// Command sched-crashy is the work-stealing policy that exits when it is
// pushed a task of priority 99: the core's scheduler-crash tests. With its
// once_file setting, it exits only if it can create that file, so that the
// instance a restart brings up takes the task instead of dying again.
package main

import (
	"os"

	"github.com/starpu-go/starpu/pluginapi/base"
	"github.com/starpu-go/starpu/pluginapi/sched"
	"github.com/starpu-go/starpu/plugins/sched-ws/ws"
)

type crashy struct {
	*ws.Policy
	once string
}

func (c *crashy) ConfigSchema() *base.Schema {
	s := c.Policy.ConfigSchema()
	s.Attrs = append(s.Attrs, base.Attr{Name: "once_file", Type: base.AttrString, Doc: "exit only if this file can be created"})
	return s
}

func (c *crashy) SetConfig(cfg base.Config) error {
	rest := base.Config{}
	for k, v := range cfg {
		if k == "once_file" {
			c.once, _ = v.(string)
			continue
		}
		rest[k] = v
	}
	return c.Policy.SetConfig(rest)
}

func (c *crashy) Push(t *sched.Task) {
	if t.Priority == 99 {
		if c.once == "" {
			os.Exit(5)
		}
		if f, err := os.OpenFile(c.once, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			os.Exit(5)
		}
	}
	c.Policy.Push(t)
}

func main() {
	sched.ServePolicy(base.Info{Name: "crashy", Version: "0.0.1"}, func() sched.Policy { return &crashy{Policy: ws.New()} })
}

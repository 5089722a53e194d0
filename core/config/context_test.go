package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/starpu-go/starpu/pluginapi/base"
)

func TestParseContexts(t *testing.T) {
	src := `
context "gpu" {
  workers = [2, 3]
  sched   = "dmda"
  config {
    alpha = 0.5
  }
}
context "cpus" {
  workers = [0, 1]
}
`
	c, err := Parse([]byte(src), "test.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := []Context{
		{Name: "gpu", Workers: []int{2, 3}, Sched: "dmda", Config: base.Config{"alpha": 0.5}},
		{Name: "cpus", Workers: []int{0, 1}},
	}
	if !reflect.DeepEqual(c.Contexts, want) {
		t.Fatalf("contexts = %+v, want %+v", c.Contexts, want)
	}
	n := c.Clone()
	n.Contexts[0].Workers[0] = 9
	if c.Contexts[0].Workers[0] != 2 {
		t.Fatal("Clone shares the contexts' worker lists")
	}
}

func TestParseContextErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"no workers attribute", "context \"a\" {\n  sched = \"ws\"\n}\n", `"workers" is required`},
		{"empty worker list", "context \"a\" {\n  workers = []\n}\n", "at least one worker"},
		{"negative worker", "context \"a\" {\n  workers = [0, -1]\n}\n", "Worker ID -1"},
		{"string worker", "context \"a\" {\n  workers = [\"x\"]\n}\n", "list of worker IDs"},
		{"workers not a list", "context \"a\" {\n  workers = 1\n}\n", "list of worker IDs"},
		{"empty sched", "context \"a\" {\n  workers = [0]\n  sched = \"\"\n}\n", "empty"},
		{"empty name", "context \"\" {\n  workers = [0]\n}\n", "Empty context name"},
		{"duplicate", "context \"a\" {\n  workers = [0]\n}\ncontext \"a\" {\n  workers = [1]\n}\n", "Duplicate context block"},
		{"unknown attribute", "context \"a\" {\n  workers = [0]\n  policy = \"ws\"\n}\n", "policy"},
		{"two config blocks", "context \"a\" {\n  workers = [0]\n  config {}\n  config {}\n}\n", "Duplicate config block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "test.hcl")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestValidateContexts(t *testing.T) {
	for _, tt := range []struct {
		name string
		ctxs []Context
		want string
	}{
		{"duplicate", []Context{{Name: "a", Workers: []int{0}}, {Name: "a", Workers: []int{1}}}, `context "a": declared twice`},
		{"no workers", []Context{{Name: "a"}}, `context "a": no workers`},
		{"no name", []Context{{Workers: []int{0}}}, "empty context name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Contexts = tt.ctxs
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

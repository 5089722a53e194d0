package core

import (
	"testing"

	"github.com/starpu-go/starpu/pluginapi/driver"
)

// The Where bits core exports are the drivers' architecture bits.
func TestWhereBits(t *testing.T) {
	for _, tt := range []struct {
		arch Arch
		bit  uint32
	}{{CPU, WhereCPU}, {CUDA, WhereCUDA}, {OpenCL, WhereOpenCL}} {
		if got := driver.ArchBit(tt.arch); got != tt.bit {
			t.Errorf("ArchBit(%s) = %d, core says %d", tt.arch, got, tt.bit)
		}
	}
}

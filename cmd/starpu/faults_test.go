package main

import (
	"testing"
)

// TestFaultCampaign runs the fault campaign with a fixed seed on every
// policy: plugins killed and stopped mid-run, each run verified or failed
// with an error naming the fault, none wrong, none hung (make faults runs
// it longer).
func TestFaultCampaign(t *testing.T) {
	kv := lastLineOf(t, "bench", "faults", "--runs", "12", "--seed", "36", "--run-timeout", "3m")
	if kv["wrong"] != "0" || kv["hangs"] != "0" || kv["unclear_errors"] != "0" {
		t.Fatalf("campaign: %v", kv)
	}
	if kv["injected"] == "0" {
		t.Fatalf("campaign injected no fault: %v", kv)
	}
	t.Logf("campaign: %v", kv)
}

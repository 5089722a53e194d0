package trace

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// pajeFields splits a Paje event line: fields separated by blanks,
// strings with blanks in double quotes.
func pajeFields(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			end := strings.IndexByte(line[1:], '"')
			if end < 0 {
				t.Fatalf("unterminated string in %q", line)
			}
			out = append(out, line[1:end+1])
			line = line[end+2:]
			continue
		}
		end := strings.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		out = append(out, line[:end])
		line = line[end:]
	}
	return out
}

// checkPaje parses a Paje trace and checks it: every event refers to a
// defined event kind with its number of fields, every type is defined
// before use, containers are created (inside existing ones) before use
// and all destroyed at the end, children first, and times never go back.
// It returns the lines per event name and the state values set.
func checkPaje(t *testing.T, data []byte) (map[string]int, map[string]int) {
	t.Helper()
	type def struct {
		name   string
		fields []string
	}
	defs := map[string]*def{}
	var cur *def
	types := map[string]bool{"0": true}
	values := map[string]bool{}
	live := map[string]string{"0": ""} // container -> parent
	destroyed := map[string]bool{}
	count := map[string]int{}
	states := map[string]int{}
	var last float64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "%") {
			f := strings.Fields(strings.TrimPrefix(line, "%"))
			switch {
			case len(f) == 3 && f[0] == "EventDef":
				cur = &def{name: f[1]}
				defs[f[2]] = cur
			case len(f) == 1 && f[0] == "EndEventDef":
				cur = nil
			case cur != nil && len(f) == 2:
				cur.fields = append(cur.fields, f[0])
			default:
				t.Fatalf("line %d: bad header line %q", n, line)
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := pajeFields(t, line)
		d := defs[f[0]]
		if d == nil {
			t.Fatalf("line %d: event %s is not defined: %q", n, f[0], line)
		}
		if len(f)-1 != len(d.fields) {
			t.Fatalf("line %d: %s has %d fields, wants %d (%v): %q", n, d.name, len(f)-1, len(d.fields), d.fields, line)
		}
		count[d.name]++
		field := func(name string) string {
			for i, x := range d.fields {
				if x == name {
					return f[i+1]
				}
			}
			t.Fatalf("line %d: %s has no field %s", n, d.name, name)
			return ""
		}
		for i, x := range d.fields {
			if x != "Time" {
				continue
			}
			tm, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil {
				t.Fatalf("line %d: time %q", n, f[i+1])
			}
			if tm < last {
				t.Fatalf("line %d: time goes back from %v to %v", n, last, tm)
			}
			last = tm
		}
		use := func(c string) {
			if _, ok := live[c]; !ok {
				t.Fatalf("line %d: container %s used before it is created, or after it is destroyed: %q", n, c, line)
			}
		}
		needType := func(ty string) {
			if !types[ty] {
				t.Fatalf("line %d: type %s is not defined", n, ty)
			}
		}
		switch d.name {
		case "PajeDefineContainerType", "PajeDefineEventType", "PajeDefineStateType":
			needType(field("ContainerType"))
			types[field("Alias")] = true
		case "PajeDefineLinkType":
			for _, k := range []string{"ContainerType", "SourceContainerType", "DestContainerType"} {
				needType(field(k))
			}
			types[field("Alias")] = true
		case "PajeDefineEntityValue":
			needType(field("EntityType"))
			values[field("EntityType")+"/"+field("Alias")] = true
		case "PajeCreateContainer":
			needType(field("Type"))
			use(field("Container"))
			live[field("Alias")] = field("Container")
		case "PajeDestroyContainer":
			c := field("Name")
			use(c)
			for _, p := range live {
				if p == c {
					t.Fatalf("line %d: %s destroyed before its children", n, c)
				}
			}
			delete(live, c)
			destroyed[c] = true
		case "PajeSetState":
			use(field("Container"))
			v := field("Type") + "/" + field("Value")
			if !values[v] {
				t.Fatalf("line %d: state value %s not defined", n, v)
			}
			states[field("Value")]++
		case "PajeNewEvent":
			needType(field("Type"))
			use(field("Container"))
		case "PajeStartLink":
			needType(field("Type"))
			use(field("Container"))
			use(field("SourceContainer"))
		case "PajeEndLink":
			needType(field("Type"))
			use(field("Container"))
			use(field("DestContainer"))
		}
	}
	if len(live) != 1 {
		t.Errorf("containers never destroyed: %v", live)
	}
	return count, states
}

func TestWritePaje(t *testing.T) {
	s, f := testStream(t)
	record(s)
	if err := s.Close(testWorkers, testNodes); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(bytes.NewReader(f.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tr.WritePaje(&b, tr.Summarize()); err != nil {
		t.Fatal(err)
	}
	count, states := checkPaje(t, b.Bytes())
	for name, want := range map[string]int{
		// MPIroot, p0, 2 nodes and their managers, 2 workers, the MPI
		// thread and its container.
		"PajeCreateContainer": 10, "PajeDestroyContainer": 10,
		"PajeStartLink": 1, "PajeEndLink": 1,
		"PajeNewEvent": 3 + 2, // the plugin events, the send posted and completed
	} {
		if count[name] != want {
			t.Errorf("%d %s, want %d", count[name], name, want)
		}
	}
	// Tasks a and b ran (one codelet, gemm: cl0); the states between.
	if states["cl0"] != 2 || states["Fi"] != 1 || states["Sc"] != 2 || states["Id"] < 3 {
		t.Errorf("states set: %v", states)
	}
	if !strings.Contains(b.String(), `"send to 1, tag -3, 64 bytes: posted"`) {
		t.Errorf("the communication is missing:\n%s", b.String())
	}

	// A sleeping worker is StarPU's Sl: worker 0 asleep in its first gap.
	var split []State
	for _, st := range tr.States {
		if st.Worker == 0 && st.Kind == StateIdle && st.Task == 1 {
			split = append(split, State{0, StateIdle, st.Start, 12, 1}, State{0, StateSleeping, 12, st.End, 1})
			continue
		}
		split = append(split, st)
	}
	tr.States = split
	b.Reset()
	if err := tr.WritePaje(&b, tr.Summarize()); err != nil {
		t.Fatal(err)
	}
	if _, states := checkPaje(t, b.Bytes()); states["Sl"] != 1 {
		t.Errorf("a sleeping state set %d times as Sl: %v", states["Sl"], states)
	}

	// A trace with no states: the gaps are idle.
	tr.States = nil
	b.Reset()
	if err := tr.WritePaje(&b, tr.Summarize()); err != nil {
		t.Fatal(err)
	}
	if _, states := checkPaje(t, b.Bytes()); states["Id"] != 2 || states["Fi"] != 0 {
		t.Errorf("states set without states recorded: %v", states)
	}
}

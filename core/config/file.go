package config

import (
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"

	"github.com/starpu-go/starpu/pluginapi/base"
)

// fileSchema is the top level of a configuration file.
var fileSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "plugin_dir"},
		{Name: "sched"},
		{Name: "ncpu"},
		{Name: "queue_depth"},
		{Name: "spin_iters"},
		{Name: "arena_size"},
		{Name: "log_level"},
		{Name: "calibrate"},
		{Name: "history_max_error"},
		{Name: "limit_max_submitted_tasks"},
		{Name: "limit_min_submitted_tasks"},
		{Name: "model_dir"},
		{Name: "plugin_timeout"},
		{Name: "plugin_restarts"},
		{Name: "watchdog_timeout"},
		{Name: "watchdog_crash"},
		{Name: "chain_tasks"},
		{Name: "min_worker_size"},
		{Name: "max_worker_size"},
		{Name: "watchdog_delay"},
		{Name: "dashboard"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "plugin", LabelNames: []string{"name"}},
		{Type: "context", LabelNames: []string{"name"}},
	},
}

// contextSchema is the body of a `context "name" { ... }` block.
var contextSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "workers", Required: true}, {Name: "sched"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "config"}},
}

// pluginSchema is the body of a `plugin "name" { ... }` block.
var pluginSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "restarts"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "config"}},
}

// LoadFile reads the HCL configuration file at path and returns Default()
// overlaid by it. A file whose name ends in ".json" is read as HCL's JSON
// syntax. Errors are prefixed with "config file <path>: " and carry HCL's
// diagnostics with file:line:col positions.
func LoadFile(path string) (*Config, error) {
	c := Default()
	if err := c.DecodeFile(path); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse parses src, the contents of an HCL configuration file named filename
// (used in positions and messages only), and returns Default() overlaid by
// it. Errors are prefixed with "config file <filename>: ".
func Parse(src []byte, filename string) (*Config, error) {
	c := Default()
	if err := c.Decode(src, filename); err != nil {
		return nil, err
	}
	return c, nil
}

// MaxFileSize is the largest configuration file accepted, in bytes.
const MaxFileSize = 1 << 20

// DecodeFile reads the configuration file at path and overlays it on c, as
// LoadFile does on Default(). Use it to start from defaults of one's own.
// The file must be a regular file (or a symbolic link to one) of at most
// MaxFileSize bytes. A relative plugin_dir in it is relative to the file's
// directory. On error c is left unchanged.
func (c *Config) DecodeFile(path string) error {
	src, err := readFile(path)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return c.decodeIn(src, path, dir)
}

// readFile reads a configuration file: a regular file of at most
// MaxFileSize bytes. Anything else (a device such as /dev/zero, a FIFO that
// would block, a directory) is refused before it is opened; a file that
// grows past the limit while it is read is refused too.
func readFile(path string) ([]byte, error) {
	regular := func(fi os.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("not a regular file (%s)", fileKind(fi.Mode()))
		}
		if fi.Size() > MaxFileSize {
			return fmt.Errorf("%d bytes, more than the %d accepted", fi.Size(), MaxFileSize)
		}
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regular(fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The path may name another file by now.
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := regular(fi); err != nil {
		return nil, err
	}
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(src) > MaxFileSize {
		return nil, fmt.Errorf("more than the %d bytes accepted", MaxFileSize)
	}
	return src, nil
}

// fileKind names the type of a file that is not a regular one.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}

// Decode overlays the configuration file contents src (named filename) on c:
// attributes present in the file replace c's values and each plugin block
// replaces c's entry of the same name. src does not come from a file that a
// relative path could be relative to, so a relative plugin_dir is an error
// (DecodeFile takes it relative to the file's directory). On error c is left
// unchanged.
func (c *Config) Decode(src []byte, filename string) error {
	return c.decodeIn(src, filename, "")
}

// decodeIn is Decode with the directory a relative plugin_dir is relative
// to; "" makes a relative plugin_dir an error.
func (c *Config) decodeIn(src []byte, filename, baseDir string) error {
	n := c.Clone()
	if diags := n.decode(src, filename, baseDir); diags.HasErrors() {
		return fmt.Errorf("config file %s: %w", filename, diagError{diags})
	}
	*c = *n
	return nil
}

// MaxNesting bounds how deeply brackets ({, [, () nest in a configuration
// file. HCL's parsers recurse once per level: a file nested 100,000 deep
// overflowed the stack (a crash no recover catches) in HCL's syntax, and
// took 28 s and 858 MB in its JSON one. A configuration needs a few levels.
const MaxNesting = 64

// checkNesting refuses src when its brackets, outside strings and
// comments, nest deeper than MaxNesting, naming the line.
func checkNesting(src []byte, filename string) hcl.Diagnostics {
	depth, line := 0, 1
	inStr, json := false, strings.HasSuffix(strings.ToLower(filename), ".json")
	for i := 0; i < len(src); i++ {
		b := src[i]
		if b == '\n' {
			line++
		}
		switch {
		case inStr:
			if b == '\\' {
				i++
			} else if b == '"' {
				inStr = false
			}
		case b == '"':
			inStr = true
		case !json && (b == '#' || b == '/' && i+1 < len(src) && src[i+1] == '/'):
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i-- // the newline is counted above
		case b == '{' || b == '[' || b == '(':
			if depth++; depth > MaxNesting {
				return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Nested too deeply",
					Detail:  fmt.Sprintf("brackets nest more than %d levels deep here (a configuration needs a few)", MaxNesting),
					Subject: &hcl.Range{Filename: filename, Start: hcl.Pos{Line: line, Column: 1}, End: hcl.Pos{Line: line, Column: 1}}}}
			}
		case b == '}' || b == ']' || b == ')':
			depth = max(depth-1, 0)
		}
	}
	return nil
}

func (c *Config) decode(src []byte, filename, baseDir string) hcl.Diagnostics {
	var (
		file  *hcl.File
		diags hcl.Diagnostics
	)
	if d := checkNesting(src, filename); d.HasErrors() {
		return d
	}
	if strings.HasSuffix(strings.ToLower(filename), ".json") {
		file, diags = hcljson.Parse(src, filename)
	} else {
		file, diags = hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	}
	if diags.HasErrors() {
		return diags
	}
	content, cdiags := file.Body.Content(fileSchema)
	diags = append(diags, cdiags...)

	// Attributes, in schema order so that diagnostics come out the same way
	// every time.
	for _, as := range fileSchema.Attributes {
		attr, ok := content.Attributes[as.Name]
		if !ok {
			continue
		}
		val, vdiags := attrValue(attr)
		diags = append(diags, vdiags...)
		if vdiags.HasErrors() {
			continue
		}
		var d *hcl.Diagnostic
		switch as.Name {
		case "plugin_dir":
			var dir string
			if dir, d = nonEmptyAttr(attr, val); d == nil {
				c.PluginDir, d = pluginDirAttr(attr, dir, baseDir)
			}
		case "sched":
			c.Sched, d = nonEmptyAttr(attr, val)
		case "log_level":
			var s string
			if s, d = stringAttr(attr, val); d == nil {
				s = strings.ToLower(s)
				if validLogLevel(s) {
					c.LogLevel = s
				} else {
					d = invalid(attr, fmt.Sprintf("Unknown log level %q; want one of %s.", s, strings.Join(LogLevels, ", ")))
				}
			}
		case "ncpu":
			c.NCPU, d = intAttr(attr, val, -1, math.MaxInt, "an integer >= 0, or -1 for one worker per core")
		case "queue_depth":
			c.QueueDepth, d = intAttr(attr, val, MinQueueDepth, MaxQueueDepth,
				fmt.Sprintf("an integer in %d..%d", MinQueueDepth, MaxQueueDepth))
		case "spin_iters":
			c.SpinIters, d = intAttr(attr, val, 0, math.MaxInt, "an integer >= 0")
		case "min_worker_size":
			c.MinWorkerSize, d = intAttr(attr, val, 0, math.MaxInt32, "an integer >= 0 (below 2 means 2)")
		case "max_worker_size":
			c.MaxWorkerSize, d = intAttr(attr, val, 0, math.MaxInt32, "an integer >= 0 (0: no bound, 1: no combined worker)")
		case "arena_size":
			c.ArenaSize, d = sizeAttr(attr, val)
		case "calibrate":
			c.Calibrate, d = intAttr(attr, val, 0, 2, "0, 1 or 2")
		case "history_max_error":
			c.HistoryMaxError, d = intAttr(attr, val, 1, math.MaxInt32, "a percentage >= 1")
		case "limit_max_submitted_tasks":
			c.LimitMaxSubmitted, d = intAttr(attr, val, 0, math.MaxInt32, "a number of tasks >= 0 (0: no limit)")
		case "limit_min_submitted_tasks":
			c.LimitMinSubmitted, d = intAttr(attr, val, 0, math.MaxInt32, "a number of tasks >= 0")
		case "model_dir":
			c.ModelDir, d = stringAttr(attr, val)
		case "plugin_restarts":
			c.PluginRestarts, d = intAttr(attr, val, 0, 1<<20, "an integer >= 0")
		case "plugin_timeout":
			c.PluginTimeout, d = durationAttr(attr, val)
		case "watchdog_timeout":
			c.WatchdogTimeout, d = durationAttr(attr, val)
		case "watchdog_delay":
			c.WatchdogDelay, d = durationAttr(attr, val)
		case "dashboard":
			var addr string
			if addr, d = nonEmptyAttr(attr, val); d == nil {
				if err := checkAddr(addr); err != nil {
					d = invalid(attr, err.Error()+".")
				} else {
					c.Dashboard = addr
				}
			}
		case "watchdog_crash":
			if d = known(attr, val); d == nil {
				if val.Type() != cty.Bool {
					d = badType(attr, val, "true or false")
				} else {
					c.WatchdogCrash = val.True()
				}
			}
		case "chain_tasks":
			if d = known(attr, val); d == nil {
				if val.Type() != cty.Bool {
					d = badType(attr, val, "true or false")
				} else {
					c.NoChain = !val.True()
				}
			}
		}
		if d != nil {
			diags = append(diags, d)
		}
	}

	// Plugin blocks.
	seen := map[string]*hcl.Block{}
	seenCtx := map[string]*hcl.Block{}
	for _, blk := range content.Blocks {
		name := blk.Labels[0]
		if blk.Type == "context" {
			diags = append(diags, c.decodeContext(blk, seenCtx)...)
			continue
		}
		if name == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Empty plugin name",
				Detail:   `A plugin block's label must name the plugin, as in plugin "sched-ws" { ... }.`,
				Subject:  blk.LabelRanges[0].Ptr(),
			})
			continue
		}
		if prev, dup := seen[name]; dup {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate plugin block",
				Detail:   fmt.Sprintf("A plugin block for %q was already defined at %s. Merge the two blocks.", name, rangePos(prev.DefRange)),
				Subject:  blk.DefRange.Ptr(),
			})
			continue
		}
		seen[name] = blk
		p, pdiags := decodePlugin(blk)
		diags = append(diags, pdiags...)
		if !pdiags.HasErrors() {
			c.Plugins[name] = p
		}
	}
	return diags
}

// decodeContext decodes a `context "name" { workers = [...]; sched = "..."
// config { ... } }` block into c.Contexts; a block of the same name replaces
// an earlier one from the defaults, not one of the same file.
func (c *Config) decodeContext(blk *hcl.Block, seen map[string]*hcl.Block) hcl.Diagnostics {
	name := blk.Labels[0]
	if strings.TrimSpace(name) == "" {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Empty context name",
			Detail: `A context block's label must name the context, as in context "gpu" { ... }.`, Subject: blk.LabelRanges[0].Ptr()}}
	}
	if prev, dup := seen[name]; dup {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Duplicate context block",
			Detail: fmt.Sprintf("A context named %q was already declared at %s.", name, rangePos(prev.DefRange)), Subject: blk.DefRange.Ptr()}}
	}
	seen[name] = blk
	content, diags := blk.Body.Content(contextSchema)
	if diags.HasErrors() {
		return diags
	}
	x := Context{Name: name}
	if attr, ok := content.Attributes["workers"]; ok {
		val, vdiags := attrValue(attr)
		diags = append(diags, vdiags...)
		if !vdiags.HasErrors() {
			ws, d := intListAttr(attr, val)
			if d != nil {
				diags = append(diags, d)
			}
			x.Workers = ws
		}
	}
	if attr, ok := content.Attributes["sched"]; ok {
		val, vdiags := attrValue(attr)
		diags = append(diags, vdiags...)
		if !vdiags.HasErrors() {
			var d *hcl.Diagnostic
			if x.Sched, d = nonEmptyAttr(attr, val); d != nil {
				diags = append(diags, d)
			}
		}
	}
	for i, cb := range content.Blocks {
		if i > 0 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate config block",
				Detail: fmt.Sprintf("Context %q already has a config block at %s.", name, rangePos(content.Blocks[0].DefRange)), Subject: cb.DefRange.Ptr()})
			continue
		}
		cfg, cdiags := decodeConfigBody(cb)
		diags = append(diags, cdiags...)
		x.Config = cfg
	}
	if diags.HasErrors() {
		return diags
	}
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			c.Contexts[i] = x
			return diags
		}
	}
	c.Contexts = append(c.Contexts, x)
	return diags
}

// intListAttr reads a non-empty list of worker IDs (whole numbers >= 0).
func intListAttr(attr *hcl.Attribute, val cty.Value) ([]int, *hcl.Diagnostic) {
	if d := known(attr, val); d != nil {
		return nil, d
	}
	if !val.Type().IsListType() && !val.Type().IsTupleType() && !val.Type().IsSetType() {
		return nil, badType(attr, val, "a list of worker IDs")
	}
	var out []int
	for it := val.ElementIterator(); it.Next(); {
		_, v := it.Element()
		if v.IsNull() || v.Type() != cty.Number {
			return nil, badType(attr, val, "a list of worker IDs (whole numbers)")
		}
		bf := v.AsBigFloat()
		i, acc := bf.Int64()
		if !bf.IsInt() || acc != big.Exact || i < 0 || i > math.MaxInt32 {
			return nil, invalid(attr, fmt.Sprintf("Worker ID %s is invalid: want a whole number >= 0.", bf.Text('g', -1)))
		}
		out = append(out, int(i))
	}
	if len(out) == 0 {
		return nil, invalid(attr, "A context needs at least one worker.")
	}
	return out, nil
}

// decodePlugin decodes the body of one plugin block: at most one config block
// of free-form scalar attributes.
func decodePlugin(blk *hcl.Block) (Plugin, hcl.Diagnostics) {
	content, diags := blk.Body.Content(pluginSchema)
	cfg := base.Config{}
	p := Plugin{Name: blk.Labels[0], Config: cfg}
	if attr, ok := content.Attributes["restarts"]; ok {
		val, vdiags := attrValue(attr)
		diags = append(diags, vdiags...)
		if !vdiags.HasErrors() {
			n, d := intAttr(attr, val, 0, 1<<20, "an integer >= 0")
			if d != nil {
				diags = append(diags, d)
			} else {
				p.Restarts = &n
			}
		}
	}
	var first *hcl.Block
	for _, cb := range content.Blocks {
		if first != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate config block",
				Detail:   fmt.Sprintf("Plugin %q already has a config block at %s.", blk.Labels[0], rangePos(first.DefRange)),
				Subject:  cb.DefRange.Ptr(),
			})
			continue
		}
		first = cb
		body, bdiags := decodeConfigBody(cb)
		diags = append(diags, bdiags...)
		maps.Copy(cfg, body)
	}
	return p, diags
}

// attrValue evaluates attr, which may not name variables: an unquoted
// word (sched = ws) gets HCL's "Variables not allowed" with what to write
// instead.
func attrValue(attr *hcl.Attribute) (cty.Value, hcl.Diagnostics) {
	val, diags := attr.Expr.Value(nil)
	if t, ok := attr.Expr.(*hclsyntax.ScopeTraversalExpr); ok && diags.HasErrors() {
		word := string(attr.Expr.Range().SliceBytes(nil))
		if len(t.Traversal) > 0 {
			word = t.Traversal.RootName()
		}
		for _, d := range diags {
			if d.Summary == "Variables not allowed" {
				d.Detail = fmt.Sprintf("%s is a word without quotes: a name is a string, as in %s = %q", word, attr.Name, word)
			}
		}
	}
	return val, diags
}

// decodeConfigBody reads a config block's free-form scalar attributes.
func decodeConfigBody(cb *hcl.Block) (base.Config, hcl.Diagnostics) {
	cfg := base.Config{}
	attrs, diags := cb.Body.JustAttributes()
	for _, name := range sortedKeys(attrs) {
		attr := attrs[name]
		val, vdiags := attrValue(attr)
		diags = append(diags, vdiags...)
		if vdiags.HasErrors() {
			continue
		}
		v, d := scalar(attr, val)
		if d != nil {
			diags = append(diags, d)
			continue
		}
		cfg[name] = v
	}
	return cfg, diags
}

// scalar converts a plugin config value to the Go type base.Config holds.
func scalar(attr *hcl.Attribute, val cty.Value) (any, *hcl.Diagnostic) {
	if d := known(attr, val); d != nil {
		return nil, d
	}
	switch val.Type() {
	case cty.String:
		return val.AsString(), nil
	case cty.Bool:
		return val.True(), nil
	case cty.Number:
		bf := val.AsBigFloat()
		if bf.IsInt() {
			if i, acc := bf.Int64(); acc == big.Exact {
				return i, nil
			}
		}
		f, _ := bf.Float64()
		return f, nil
	}
	return nil, badType(attr, val, "a string, number or bool")
}

func stringAttr(attr *hcl.Attribute, val cty.Value) (string, *hcl.Diagnostic) {
	if d := known(attr, val); d != nil {
		return "", d
	}
	if val.Type() != cty.String {
		return "", badType(attr, val, "a string")
	}
	return val.AsString(), nil
}

func nonEmptyAttr(attr *hcl.Attribute, val cty.Value) (string, *hcl.Diagnostic) {
	s, d := stringAttr(attr, val)
	if d == nil && strings.TrimSpace(s) == "" {
		return "", invalid(attr, "The value must not be empty.")
	}
	return s, d
}

func intAttr(attr *hcl.Attribute, val cty.Value, min, max int, want string) (int, *hcl.Diagnostic) {
	if d := known(attr, val); d != nil {
		return 0, d
	}
	if val.Type() != cty.Number {
		return 0, badType(attr, val, "a whole number")
	}
	bf := val.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact || i < int64(min) || i > int64(max) {
		return 0, invalid(attr, fmt.Sprintf("%s is out of range: want %s.", bf.Text('g', -1), want))
	}
	return int(i), nil
}

// durationAttr reads a duration: a string such as "10s" or a number of
// seconds.
func durationAttr(attr *hcl.Attribute, val cty.Value) (time.Duration, *hcl.Diagnostic) {
	if d := known(attr, val); d != nil {
		return 0, d
	}
	var s string
	switch val.Type() {
	case cty.String:
		s = val.AsString()
	case cty.Number:
		s = val.AsBigFloat().Text('g', -1)
	default:
		return 0, badType(attr, val, `a duration such as "10s", or a number of seconds`)
	}
	dur, err := ParseDuration(s)
	if err != nil {
		return 0, invalid(attr, fmt.Sprintf("%q: %v.", s, err))
	}
	return dur, nil
}

func sizeAttr(attr *hcl.Attribute, val cty.Value) (uint64, *hcl.Diagnostic) {
	if d := known(attr, val); d != nil {
		return 0, d
	}
	bad := func(detail string) *hcl.Diagnostic { return invalid(attr, detail) }
	switch val.Type() {
	case cty.String:
		n, err := ParseSize(val.AsString())
		if err != nil {
			return 0, bad(err.Error() + ".")
		}
		return n, nil
	case cty.Number:
		bf := val.AsBigFloat()
		n, acc := bf.Uint64()
		if !bf.IsInt() || acc != big.Exact {
			return 0, bad(fmt.Sprintf("%s is not a whole, non-negative number of bytes that fits in 64 bits.", bf.Text('g', -1)))
		}
		return n, nil
	}
	return 0, badType(attr, val, `a size such as "8GiB" or a number of bytes`)
}

// known rejects null values (unknown ones cannot occur without variables).
func known(attr *hcl.Attribute, val cty.Value) *hcl.Diagnostic {
	if val.IsNull() {
		return invalid(attr, "The value must not be null.")
	}
	if !val.IsWhollyKnown() {
		return invalid(attr, "The value must be known when the file is read.")
	}
	return nil
}

// invalid reports a value of the right type that is not acceptable.
func invalid(attr *hcl.Attribute, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity:   hcl.DiagError,
		Summary:    fmt.Sprintf("Invalid value for %q", attr.Name),
		Detail:     detail,
		Subject:    attr.Expr.Range().Ptr(),
		Expression: attr.Expr,
	}
}

func badType(attr *hcl.Attribute, val cty.Value, want string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity:   hcl.DiagError,
		Summary:    fmt.Sprintf("Incorrect type for %q", attr.Name),
		Detail:     fmt.Sprintf("Attribute %q at %s must be %s, not %s.", attr.Name, rangePos(attr.Expr.Range()), want, val.Type().FriendlyName()),
		Subject:    attr.Expr.Range().Ptr(),
		Expression: attr.Expr,
	}
}

// rangePos formats the start of r as file:line:col.
func rangePos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// diagError renders every error diagnostic as "file:line:col: summary; detail",
// one per line. It unwraps to the hcl.Diagnostics, so that callers wanting
// the structured form can use errors.As.
type diagError struct{ diags hcl.Diagnostics }

func (e diagError) Error() string {
	var b strings.Builder
	for _, d := range e.diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		if d.Subject != nil {
			b.WriteString(rangePos(*d.Subject))
			b.WriteString(": ")
		}
		b.WriteString(d.Summary)
		if d.Detail != "" {
			b.WriteString("; ")
			b.WriteString(d.Detail)
		}
	}
	return b.String()
}

func (e diagError) Unwrap() error { return e.diags }

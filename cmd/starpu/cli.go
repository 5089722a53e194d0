package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// usageError is a command line the tool cannot make sense of: an unknown
// command or flag, a flag that means nothing for the command, a value out
// of range. The tool exits 2 for it, as the flag package does for its own
// errors, and 1 for a command that was understood but failed.
type usageError struct{ err error }

// Error is the cause's message, which already names the command.
func (e usageError) Error() string { return e.err.Error() }

// Unwrap keeps the cause (a flag package error, say) visible to errors.Is.
func (e usageError) Unwrap() error { return e.err }

// usagef is fmt.Errorf for a usage error, so that the exit status says the
// command line was wrong rather than the command.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// cli runs the tool on args and returns its exit status: 0, 1 when the
// command failed, 2 for a usage error. Help goes to stdout, since it is
// what was asked for; errors go to stderr. It is main without the signals
// and os.Exit, so that tests can check the statuses and the streams.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "starpu:", err)
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

// cmdFlags is the flag set of one command. It prints nothing by itself:
// parse sends -h to the command's output and turns the flag package's
// errors into usage errors that name the command, so that every command
// answers -h, an unknown flag and a flag that means nothing for it alike.
type cmdFlags struct {
	*flag.FlagSet
	name     string            // as typed after starpu: "run vector-scal"
	synopsis string            // what follows the name in the usage line: "[flags] NAME"
	summary  string            // what the command does
	refused  map[string]string // flag name -> why it means nothing for this command
}

// newCmd makes the flag set of command name; synopsis and summary are the
// first lines of its -h output.
func newCmd(name, synopsis, summary string) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, name: name, synopsis: synopsis, summary: summary, refused: map[string]string{}}
}

// refuse names flags that other commands take and this one does not, with
// the reason, so that the error says why the flag is refused instead of
// only that it is unknown.
func (c *cmdFlags) refuse(why string, names ...string) {
	for _, n := range names {
		c.refused[n] = why
	}
}

// printHelp writes the command's -h output: usage line, summary, flags.
func (c *cmdFlags) printHelp(out io.Writer) {
	line := "usage: starpu " + c.name
	if c.synopsis != "" {
		line += " " + c.synopsis
	}
	fmt.Fprintf(out, "%s\n\n%s\n", line, c.summary)
	n := 0
	c.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		fmt.Fprintln(out, "\nIt takes no flags.")
		return
	}
	fmt.Fprintln(out, "\nflags:")
	c.SetOutput(out)
	c.PrintDefaults()
	c.SetOutput(io.Discard)
}

// parse parses args, which must all be flags: a command that takes no
// argument refuses one rather than ignore it. On -h it prints the help to
// out and returns flag.ErrHelp, which run turns into success.
func (c *cmdFlags) parse(args []string, out io.Writer) error {
	if err := c.Parse(args); err != nil {
		return c.parseError(err, out)
	}
	if c.NArg() > 0 {
		return usagef("%s: unexpected argument %q (starpu %s -h lists its flags)", c.name, c.Arg(0), c.name)
	}
	return nil
}

// parseInterspersed parses flags placed before or after the positional
// arguments ("plot NAME -o f.svg" as well as "plot -o f.svg NAME") and
// returns the positional arguments.
func (c *cmdFlags) parseInterspersed(args []string, out io.Writer) ([]string, error) {
	pos, err := parseInterspersed(c.FlagSet, args)
	if err != nil {
		return nil, c.parseError(err, out)
	}
	return pos, nil
}

// parseError answers an error of flag.FlagSet.Parse: the help for -h, the
// reason for a refused flag, a usage error naming the command otherwise.
func (c *cmdFlags) parseError(err error, out io.Writer) error {
	if errors.Is(err, flag.ErrHelp) {
		c.printHelp(out)
		return err
	}
	// The flag package has no error type for an undefined flag; this is
	// its message.
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		dash := "--"
		if len(name) == 1 {
			dash = "-"
		}
		if why, ok := c.refused[name]; ok {
			return usagef("%s takes no %s%s: %s", c.name, dash, name, why)
		}
		return usagef("%s: unknown flag %s%s (starpu %s -h lists its flags)", c.name, dash, name, c.name)
	}
	return usageError{fmt.Errorf("%s: %w", c.name, err)}
}

// given tells whether flag name was on the command line, for the flags
// that mean nothing beside another one.
func (c *cmdFlags) given(name string) bool {
	found := false
	c.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// optionalInt is an int flag that knows whether it was given, so that "not
// given" (fall back on the environment and the config file) needs no
// sentinel value, and -h shows no made-up default.
type optionalInt struct {
	v   int
	set bool
}

// String is the flag's value as -h shows it: nothing when it was not given.
func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.Itoa(o.v)
}

// Set parses a given value.
func (o *optionalInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return errors.New("want a whole number")
	}
	o.v, o.set = int(v), true
	return nil
}

// optionalFloat is optionalInt for a float64 flag.
type optionalFloat struct {
	v   float64
	set bool
}

// String is the flag's value as -h shows it: nothing when it was not given.
func (o *optionalFloat) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatFloat(o.v, 'g', -1, 64)
}

// Set parses a given value.
func (o *optionalFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("want a number")
	}
	o.v, o.set = v, true
	return nil
}

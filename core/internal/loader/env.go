package loader

import "strings"

// passEnv lists the variables of the core's environment that a plugin
// process inherits; the rest of the environment is withheld (credentials,
// tokens and the like are none of a plugin's business). Besides these,
// every variable whose name starts with one of passEnvPrefixes is passed.
//
// The Go runtime's variables are passed so that a plugin can be debugged
// and tuned as the core is; XDG_CACHE_HOME is where pocl keeps its kernel
// cache.
var passEnv = []string{
	"PATH", "HOME", "TMPDIR", "LANG", "TZ", "LD_LIBRARY_PATH", "XDG_CACHE_HOME",
	"GODEBUG", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GOTRACEBACK",
}

// passEnvPrefixes are the name prefixes of the variables, besides passEnv,
// that a plugin process inherits: the runtime's own (STARPU_), the
// locale's, and those read by the libraries drivers use (OpenBLAS, OpenMP,
// pocl, the OpenCL ICD loader, CUDA).
var passEnvPrefixes = []string{"STARPU_", "LC_", "OPENBLAS_", "OMP_", "POCL_", "OCL_", "CUDA_"}

// pluginEnv is the part of environ (os.Environ's form) that a plugin
// inherits: the variables in passEnv or with a prefix in passEnvPrefixes.
func pluginEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && passed(name) {
			out = append(out, kv)
		}
	}
	return out
}

func passed(name string) bool {
	for _, n := range passEnv {
		if name == n {
			return true
		}
	}
	for _, p := range passEnvPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

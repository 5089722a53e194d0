// The loader: dlopen a library, dlsym every entry point of its table.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cushim.h"

typedef struct {
	const char *name;  /* the table field's own name */
	const char *first; /* a name tried before it, or NULL */
	size_t offset;     /* where the pointer goes in the table */
	int optional;      /* NULL is allowed */
} sc_sym;

#define SC_SYM(ret, name, params) {#name, NULL, offsetof(SC_TABLE, name), 0},
#define SC_OPT(ret, name, params) {#name, NULL, offsetof(SC_TABLE, name), 1},
#define SC_ALT(ret, name, first, params) {#name, #first, offsetof(SC_TABLE, name), 0},

#define SC_TABLE sc_driver
static const sc_sym driver_syms[] = {SC_DRIVER_FUNCS(SC_SYM) SC_DRIVER_ALTS(SC_ALT)};
#undef SC_TABLE
#define SC_TABLE sc_blas
static const sc_sym blas_syms[] = {SC_BLAS_FUNCS(SC_SYM) SC_BLAS_OPTIONAL(SC_OPT)};
#undef SC_TABLE
#define SC_TABLE sc_solver
static const sc_sym solver_syms[] = {SC_SOLVER_FUNCS(SC_SYM) SC_SOLVER_OPTIONAL(SC_OPT)};
#undef SC_TABLE
#define SC_TABLE sc_nvrtc
static const sc_sym nvrtc_syms[] = {SC_NVRTC_FUNCS(SC_SYM) SC_NVRTC_OPTIONAL(SC_OPT)};
#undef SC_TABLE

#define SC_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Every field of a table has exactly one entry (fields are all function
 * pointers of the same size). */
_Static_assert(sizeof(sc_driver) == SC_COUNT(driver_syms) * sizeof(void (*)(void)), "driver table and symbol list differ");
_Static_assert(sizeof(sc_blas) == SC_COUNT(blas_syms) * sizeof(void (*)(void)), "cuBLAS table and symbol list differ");
_Static_assert(sizeof(sc_solver) == SC_COUNT(solver_syms) * sizeof(void (*)(void)), "cuSOLVER table and symbol list differ");
_Static_assert(sizeof(sc_nvrtc) == SC_COUNT(nvrtc_syms) * sizeof(void (*)(void)), "NVRTC table and symbol list differ");

static void copystr(char *dst, size_t len, const char *src) {
	if (len == 0) {
		return;
	}
	if (src == NULL) {
		src = "";
	}
	snprintf(dst, len, "%s", src);
}

void *sc_open(const char *name, char *err, size_t errlen) {
	dlerror();
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		copystr(err, errlen, dlerror());
	}
	return h;
}

void sc_close(void *handle) { dlclose(handle); }

int sc_path(void *handle, char *path, size_t len) {
	struct link_map *lm = NULL;
	if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL || lm->l_name == NULL) {
		copystr(path, len, "");
		return -1;
	}
	copystr(path, len, lm->l_name);
	return 0;
}

static const sc_sym *syms_of(int kind, size_t *n, size_t *size) {
	switch (kind) {
	case SC_LIB_DRIVER:
		*n = SC_COUNT(driver_syms);
		*size = sizeof(sc_driver);
		return driver_syms;
	case SC_LIB_BLAS:
		*n = SC_COUNT(blas_syms);
		*size = sizeof(sc_blas);
		return blas_syms;
	case SC_LIB_SOLVER:
		*n = SC_COUNT(solver_syms);
		*size = sizeof(sc_solver);
		return solver_syms;
	case SC_LIB_NVRTC:
		*n = SC_COUNT(nvrtc_syms);
		*size = sizeof(sc_nvrtc);
		return nvrtc_syms;
	}
	*n = 0;
	*size = 0;
	return NULL;
}

int sc_nsyms(int kind) {
	size_t n, size;
	syms_of(kind, &n, &size);
	return (int)n;
}

const char *sc_symname(int kind, int i, int *optional) {
	size_t n, size;
	const sc_sym *s = syms_of(kind, &n, &size);
	if (i < 0 || (size_t)i >= n) {
		return NULL;
	}
	*optional = s[i].optional;
	return s[i].first != NULL ? s[i].first : s[i].name;
}

void *sc_load(int kind, void *handle, char *missing, size_t missinglen, char *err, size_t errlen) {
	size_t n, size;
	const sc_sym *s = syms_of(kind, &n, &size);
	if (s == NULL) {
		return NULL;
	}
	char *table = calloc(1, size);
	if (table == NULL) {
		copystr(err, errlen, "out of memory");
		return NULL;
	}
	size_t used = 0;
	int nmissing = 0;
	if (missinglen > 0) {
		missing[0] = 0;
	}
	copystr(err, errlen, "");
	for (size_t i = 0; i < n; i++) {
		void *p = NULL;
		dlerror();
		if (s[i].first != NULL) {
			p = dlsym(handle, s[i].first);
			if (p == NULL) {
				dlerror();
				p = dlsym(handle, s[i].name);
			}
		} else {
			p = dlsym(handle, s[i].name);
		}
		if (p == NULL) {
			const char *e = dlerror();
			if (s[i].optional) {
				continue;
			}
			if (nmissing == 0) {
				copystr(err, errlen, e);
			}
			nmissing++;
			const char *name = s[i].first != NULL ? s[i].first : s[i].name;
			size_t l = strlen(name);
			if (used + l + 2 < missinglen) {
				if (used > 0) {
					missing[used++] = ' ';
				}
				memcpy(missing + used, name, l);
				used += l;
				missing[used] = 0;
			}
			continue;
		}
		memcpy(table + s[i].offset, &p, sizeof p);
	}
	if (nmissing > 0) {
		free(table);
		return NULL;
	}
	return table;
}

int sc_driver_version(void *handle, int *version) {
	dlerror();
	sc_result (*fn)(int *) = (sc_result(*)(int *))dlsym(handle, "cuDriverGetVersion");
	if (fn == NULL) {
		return -1;
	}
	return fn(version);
}

/* The stencil of examples/stencil written against StarPU 1.3's C API, to
 * compare length, build and run time (scripts/stencil-vs-starpu.sh):
 *   gcc -O2 stencil.c $(pkg-config --cflags --libs starpu-1.3) -lopenblas */
#include <starpu.h>
#include <cblas.h>
#include <stdio.h>
#define N (1 << 20)
#define NBLOCKS 8
#define SWEEPS 10

static void smooth(void *buffers[], void *arg) {
	(void)arg;
	float *left = (float *)STARPU_VECTOR_GET_PTR(buffers[0]), *mid = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	float *right = (float *)STARPU_VECTOR_GET_PTR(buffers[2]), *out = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);
	unsigned m = STARPU_VECTOR_GET_NX(buffers[1]), nl = STARPU_VECTOR_GET_NX(buffers[0]);
	for (unsigned i = 0; i < m; i++) {
		float prev = i > 0 ? mid[i - 1] : left[nl - 1], next = i < m - 1 ? mid[i + 1] : right[0];
		out[i] = (prev + mid[i] + next) / 3;
	}
}

static void axpy(void *buffers[], void *arg) {
	(void)arg;
	cblas_saxpy(STARPU_VECTOR_GET_NX(buffers[0]), 2, (float *)STARPU_VECTOR_GET_PTR(buffers[0]), 1,
		    (float *)STARPU_VECTOR_GET_PTR(buffers[1]), 1);
}

static void dot(void *buffers[], void *arg) {
	(void)arg;
	*(float *)STARPU_VARIABLE_GET_PTR(buffers[2]) = cblas_sdot(STARPU_VECTOR_GET_NX(buffers[0]),
		(float *)STARPU_VECTOR_GET_PTR(buffers[0]), 1, (float *)STARPU_VECTOR_GET_PTR(buffers[1]), 1);
}

static struct starpu_codelet smooth_cl = {.cpu_funcs = {smooth}, .nbuffers = 4, .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W}};
static struct starpu_codelet axpy_cl = {.cpu_funcs = {axpy}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}};
static struct starpu_codelet dot_cl = {.cpu_funcs = {dot}, .nbuffers = 3, .modes = {STARPU_R, STARPU_R, STARPU_W}};

int main(void) {
	static float x[N], y[N];
	float dots[NBLOCKS];
	starpu_data_handle_t hx, hy, hd[NBLOCKS];
	if (starpu_init(NULL) != 0) return 77;
	for (int i = 0; i < N; i++) x[i] = i % 100;
	starpu_vector_data_register(&hx, STARPU_MAIN_RAM, (uintptr_t)x, N, sizeof(float));
	starpu_vector_data_register(&hy, STARPU_MAIN_RAM, (uintptr_t)y, N, sizeof(float));
	struct starpu_data_filter f = {.filter_func = starpu_vector_filter_block, .nchildren = NBLOCKS};
	starpu_data_partition(hx, &f);
	starpu_data_partition(hy, &f);
	starpu_data_handle_t a = hx, b = hy, t;
	for (int s = 0; s < SWEEPS; s++) {
		for (int k = 0; k < NBLOCKS; k++)
			starpu_task_insert(&smooth_cl, STARPU_R, starpu_data_get_sub_data(a, 1, (k + NBLOCKS - 1) % NBLOCKS),
					   STARPU_R, starpu_data_get_sub_data(a, 1, k), STARPU_R,
					   starpu_data_get_sub_data(a, 1, (k + 1) % NBLOCKS), STARPU_W,
					   starpu_data_get_sub_data(b, 1, k), 0);
		t = a, a = b, b = t;
	}
	for (int k = 0; k < NBLOCKS; k++) {
		starpu_task_insert(&axpy_cl, STARPU_R, starpu_data_get_sub_data(a, 1, k), STARPU_RW, starpu_data_get_sub_data(b, 1, k), 0);
		starpu_variable_data_register(&hd[k], STARPU_MAIN_RAM, (uintptr_t)&dots[k], sizeof(float));
		starpu_task_insert(&dot_cl, STARPU_R, starpu_data_get_sub_data(a, 1, k), STARPU_R, starpu_data_get_sub_data(b, 1, k), STARPU_W, hd[k], 0);
	}
	double sum = 0;
	for (int k = 0; k < NBLOCKS; k++) {
		starpu_data_unregister(hd[k]);
		sum += dots[k];
	}
	printf("x·y = %.6g\n", sum);
	starpu_data_unpartition(hx, STARPU_MAIN_RAM);
	starpu_data_unpartition(hy, STARPU_MAIN_RAM);
	starpu_data_unregister(hx);
	starpu_data_unregister(hy);
	starpu_shutdown();
	return 0;
}

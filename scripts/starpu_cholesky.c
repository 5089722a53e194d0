/*
 * The tiled Cholesky factorisation `starpu run cholesky` runs, written
 * against StarPU 1.3's C API: the same tiles, task order, priorities and
 * BLAS calls, so that a comparison with StarPU measures the runtimes and
 * not the kernels.
 *
 * StarPU's own example (cholesky_implicit, in Debian's starpu-examples)
 * updates each diagonal tile with a whole GEMM and factorises the diagonal
 * tiles with a loop of SSCAL and SSYR unless StarPU was built with MKL:
 * about 8% more kernel time than LAPACK's SPOTRF and SSYRK, which ours
 * calls. scripts/cholesky-ab.sh runs this program beside that example.
 *
 * Build: cc -O2 starpu_cholesky.c $(pkg-config --cflags --libs starpu-1.3)
 *        -llapacke -lopenblas -lm
 * Usage: a.out [-size N] [-nblocks NB] [-layout partition|contiguous]
 *              [-check] [-profile]
 * Prints: starpu cholesky-same size=N nblocks=NB layout=L sched=S ms=T gflops=G
 *         [backward_error=E verified=true|false] [kernel_share=F]
 * -profile turns StarPU's profiling on and prints the share of the workers'
 * time in the factorisation spent in kernels: the most any runtime calling
 * these kernels could gain on this machine is 1/F.
 * -layout partition (the default) cuts one matrix into tiles by filters, as
 * cholesky_implicit does; contiguous allocates and registers each lower tile
 * apart, as `starpu run cholesky --layout contiguous` does. Tiles of one
 * matrix have its order as leading dimension, a power of two here, which
 * makes the kernels slower than on tiles apart: comparing ours with StarPU
 * on one layout keeps that difference out of the ratio.
 */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <starpu.h>

/* A tile: StarPU's matrix interface with nx rows (the contiguous
 * dimension), ny columns and leading dimension ld. */
#define TILE(d) ((float *)STARPU_MATRIX_GET_PTR(d))
#define ROWS(d) ((int)STARPU_MATRIX_GET_NX(d))
#define COLS(d) ((int)STARPU_MATRIX_GET_NY(d))
#define LD(d) ((int)STARPU_MATRIX_GET_LD(d))

/* A(k,k) = L(k,k), lower, in place. */
static void potrf_cpu(void *buffers[], void *arg)
{
	(void)arg;
	int info = LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'L', ROWS(buffers[0]),
				       TILE(buffers[0]), LD(buffers[0]));
	if (info != 0)
	{
		fprintf(stderr, "spotrf: info %d: the matrix is not positive definite\n", info);
		exit(1);
	}
}

/* A(m,k) = A(m,k) L(k,k)^-T. */
static void trsm_cpu(void *buffers[], void *arg)
{
	(void)arg;
	cblas_strsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit,
		    ROWS(buffers[1]), COLS(buffers[1]), 1.0f,
		    TILE(buffers[0]), LD(buffers[0]), TILE(buffers[1]), LD(buffers[1]));
}

/* A(m,m) -= A(m,k) A(m,k)^T, lower triangle only. */
static void syrk_cpu(void *buffers[], void *arg)
{
	(void)arg;
	cblas_ssyrk(CblasColMajor, CblasLower, CblasNoTrans, ROWS(buffers[1]), COLS(buffers[0]),
		    -1.0f, TILE(buffers[0]), LD(buffers[0]), 1.0f, TILE(buffers[1]), LD(buffers[1]));
}

/* A(m,j) -= A(m,k) A(j,k)^T. */
static void gemm_cpu(void *buffers[], void *arg)
{
	(void)arg;
	cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans,
		    ROWS(buffers[2]), COLS(buffers[2]), COLS(buffers[0]), -1.0f,
		    TILE(buffers[0]), LD(buffers[0]), TILE(buffers[1]), LD(buffers[1]),
		    1.0f, TILE(buffers[2]), LD(buffers[2]));
}

/* History-based models, as StarPU's example has, so that dmda places by
 * them once calibrated (the script runs once to calibrate). */
static struct starpu_perfmodel potrf_model = {.type = STARPU_HISTORY_BASED, .symbol = "same_kernels_potrf"};
static struct starpu_perfmodel trsm_model = {.type = STARPU_HISTORY_BASED, .symbol = "same_kernels_trsm"};
static struct starpu_perfmodel syrk_model = {.type = STARPU_HISTORY_BASED, .symbol = "same_kernels_syrk"};
static struct starpu_perfmodel gemm_model = {.type = STARPU_HISTORY_BASED, .symbol = "same_kernels_gemm"};

static struct starpu_codelet potrf_cl = {
	.cpu_funcs = {potrf_cpu}, .nbuffers = 1, .modes = {STARPU_RW}, .model = &potrf_model, .name = "potrf"};
static struct starpu_codelet trsm_cl = {
	.cpu_funcs = {trsm_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}, .model = &trsm_model, .name = "trsm"};
static struct starpu_codelet syrk_cl = {
	.cpu_funcs = {syrk_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}, .model = &syrk_model, .name = "syrk"};
static struct starpu_codelet gemm_cl = {
	.cpu_funcs = {gemm_cpu}, .nbuffers = 3, .modes = {STARPU_R, STARPU_R, STARPU_RW}, .model = &gemm_model, .name = "gemm"};

/* The test matrix of StarPU's examples and ours: a Hilbert matrix plus n on
 * the diagonal. */
static float element(int i, int j, int n)
{
	return 1.0f / (float)(i + j + 1) + (i == j ? (float)n : 0.0f);
}

static void must(int ret, const char *what)
{
	if (ret != 0)
	{
		fprintf(stderr, "%s: error %d\n", what, ret);
		exit(1);
	}
}

/* The factor's componentwise backward error: the largest, over the lower
 * triangle, of |L L^T - A|(i,j) / (|L| |L|^T)(i,j), in double precision.
 * A normwise residual would not do: the matrix is n on the diagonal and at
 * most 1 elsewhere, so an update wrong by half moves it less than single
 * precision's rounding does. A correct factor stays within a small multiple
 * of the precision; a wrong update makes it of order 1. */
static double backward_error(const float *l, int n)
{
	double worst = 0;
	for (int j = 0; j < n; j++)
		for (int i = j; i < n; i++)
		{
			double s = 0, abs_s = 0;
			for (int p = 0; p <= j; p++)
			{
				double t = (double)l[i + (size_t)p * n] * l[j + (size_t)p * n];
				s += t;
				abs_s += fabs(t);
			}
			worst = fmax(worst, fabs(s - element(i, j, n)) / abs_s);
		}
	return worst;
}

int main(int argc, char **argv)
{
	int n = 4096, nb = 16, check = 0, profile = 0;
	const char *layout = "partition";
	for (int i = 1; i < argc; i++)
	{
		if (!strcmp(argv[i], "-size") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-nblocks") && i + 1 < argc)
			nb = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-layout") && i + 1 < argc)
			layout = argv[++i];
		else if (!strcmp(argv[i], "-check"))
			check = 1;
		else if (!strcmp(argv[i], "-profile"))
			profile = 1;
		else
		{
			fprintf(stderr, "usage: %s [-size N] [-nblocks NB] [-layout partition|contiguous] [-check] [-profile]\n",
				argv[0]);
			return 2;
		}
	}
	int apart = !strcmp(layout, "contiguous");
	if (!apart && strcmp(layout, "partition"))
	{
		fprintf(stderr, "-layout %s: want partition or contiguous\n", layout);
		return 2;
	}
	if (n < 1 || nb < 1 || n % nb != 0)
	{
		fprintf(stderr, "-size %d must be a positive multiple of -nblocks %d\n", n, nb);
		return 2;
	}
	must(starpu_init(NULL), "starpu_init");

	float *a;
	must(starpu_malloc((void **)&a, (size_t)n * n * sizeof(float)), "starpu_malloc");
	for (int j = 0; j < n; j++)
		for (int i = 0; i < n; i++)
			a[i + (size_t)j * n] = element(i, j, n);

	int bs = n / nb;
	starpu_data_handle_t whole = NULL;
	/* With tiles apart, tile (m,k) of the lower triangle is tiles[m*nb+k]. */
	starpu_data_handle_t *tiles = calloc((size_t)nb * nb, sizeof *tiles);
	float **tile = calloc((size_t)nb * nb, sizeof *tile);
	if (!tiles || !tile)
		must(1, "calloc");
	if (apart)
	{
		for (int m = 0; m < nb; m++)
			for (int k = 0; k <= m; k++)
			{
				float *t;
				must(starpu_malloc((void **)&t, (size_t)bs * bs * sizeof(float)), "starpu_malloc");
				for (int j = 0; j < bs; j++)
					for (int i = 0; i < bs; i++)
						t[i + (size_t)j * bs] = a[m * bs + i + (size_t)(k * bs + j) * n];
				tile[m * nb + k] = t;
				starpu_matrix_data_register(&tiles[m * nb + k], STARPU_MAIN_RAM, (uintptr_t)t, bs, bs, bs,
							    sizeof(float));
			}
	}
	else
	{
		starpu_matrix_data_register(&whole, STARPU_MAIN_RAM, (uintptr_t)a, n, n, n, sizeof(float));
		/* The first filter cuts the columns, the second the rows: tile
		 * (m,k), rows m and columns k, is sub-data (k, m). */
		struct starpu_data_filter cols = {.filter_func = starpu_matrix_filter_vertical_block, .nchildren = nb};
		struct starpu_data_filter rows = {.filter_func = starpu_matrix_filter_block, .nchildren = nb};
		starpu_data_map_filters(whole, 2, &cols, &rows);
	}
#define T(m, k) (apart ? tiles[(m) * nb + (k)] : starpu_data_get_sub_data(whole, 2, (k), (m)))

	/* StarPU's example gives its critical tasks the highest priority the
	 * policy has; ours gives them 2 and 1 above the others' 0. */
	int top = STARPU_MAX_PRIO, low = STARPU_DEFAULT_PRIO;
	int workers = starpu_worker_get_count();
	if (profile)
	{
		starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
		for (int w = 0; w < workers; w++)
			starpu_profiling_worker_get_info(w, NULL); /* resets */
	}
	struct timeval start, end;
	gettimeofday(&start, NULL);
	for (int k = 0; k < nb; k++)
	{
		must(starpu_task_insert(&potrf_cl, STARPU_PRIORITY, top, STARPU_RW, T(k, k), 0), "potrf");
		for (int m = k + 1; m < nb; m++)
			must(starpu_task_insert(&trsm_cl, STARPU_PRIORITY, m == k + 1 ? top : low,
						STARPU_R, T(k, k), STARPU_RW, T(m, k), 0), "trsm");
		for (int m = k + 1; m < nb; m++)
		{
			for (int j = k + 1; j < m; j++)
				must(starpu_task_insert(&gemm_cl, STARPU_PRIORITY, low,
							STARPU_R, T(m, k), STARPU_R, T(j, k), STARPU_RW, T(m, j), 0), "gemm");
			must(starpu_task_insert(&syrk_cl, STARPU_PRIORITY, m == k + 1 ? top : low,
						STARPU_R, T(m, k), STARPU_RW, T(m, m), 0), "syrk");
		}
	}
	starpu_task_wait_for_all();
	gettimeofday(&end, NULL);
	double executing_us = 0;
	for (int w = 0; profile && w < workers; w++)
	{
		struct starpu_profiling_worker_info info;
		if (starpu_profiling_worker_get_info(w, &info) == 0)
			executing_us += starpu_timing_timespec_to_us(&info.executing_time);
	}
	if (apart)
		for (int m = 0; m < nb; m++)
			for (int k = 0; k <= m; k++)
			{
				starpu_data_unregister(tiles[m * nb + k]);
				const float *t = tile[m * nb + k];
				for (int j = 0; j < bs; j++)
					memcpy(&a[m * bs + (size_t)(k * bs + j) * n], &t[(size_t)j * bs], bs * sizeof(float));
				starpu_free(tile[m * nb + k]);
			}
	else
	{
		starpu_data_unpartition(whole, STARPU_MAIN_RAM);
		starpu_data_unregister(whole);
	}
	free(tiles);
	free(tile);

	double ms = (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_usec - start.tv_usec) / 1e3;
	double flop = (double)n * n * n / 3;
	printf("starpu cholesky-same size=%d nblocks=%d layout=%s sched=%s ms=%.1f gflops=%.2f", n, nb, layout,
	       getenv("STARPU_SCHED") ? getenv("STARPU_SCHED") : "default", ms, flop / ms / 1e6);
	int ok = 1;
	if (check)
	{
		double r = backward_error(a, n);
		ok = r < 1e-5;
		printf(" backward_error=%.3g verified=%s", r, ok ? "true" : "false");
	}
	if (profile)
		printf(" kernel_share=%.3f", executing_us / 1e3 / (ms * workers));
	printf("\n");
	starpu_free(a);
	starpu_shutdown();
	return ok ? 0 : 1;
}

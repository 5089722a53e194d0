// The driver's built-in BLAS kernels, after plugins/driver-cpu/blasarg. The
// file is built once per precision: with -DREAL=float -DSFX=f32, and with
// -DREAL=double -DSFX=f64 -DUSE_FP64 on devices with cl_khr_fp64, so that
// each kernel exists as name_f32 and name_f64.
//
// Calling convention (see the package doc): each buffer is its pointer
// followed by its shape as uint (vector: nx; matrix: nx, ny, ld); a plugin
// interface's datum is a pointer per part, then its layout as five ulong;
// then the decoded task argument as scalars. Matrices are column-major: element
// (i, j) is at i + j*ld. The host checks every shape before a launch.

#ifdef USE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define K(name) CAT(name, SFX)

// x = alpha*x.
kernel void K(scal)(global REAL *x, uint nx, REAL alpha) {
	size_t i = get_global_id(0);
	if (i < nx)
		x[i] *= alpha;
}

// y = alpha*x + y.
kernel void K(axpy)(global const REAL *x, uint xn, global REAL *y, uint yn, REAL alpha) {
	size_t i = get_global_id(0);
	if (i < yn)
		y[i] += alpha * x[i];
}

// GEMM_TILE must match gemmTile in library.go: the work-group is
// GEMM_TILE x GEMM_TILE and the global size is C's rounded up to it.
#define GEMM_TILE 16

// C (m x n) = alpha*op(A)*op(B) + beta*C, with op(A) m x k and op(B) k x n.
kernel void K(gemm)(global const REAL *A, uint anx, uint any, uint lda,
		global const REAL *B, uint bnx, uint bny, uint ldb,
		global REAL *C, uint m, uint n, uint ldc,
		int transA, int transB, REAL alpha, REAL beta) {
	local REAL as[GEMM_TILE][GEMM_TILE + 1];
	local REAL bs[GEMM_TILE][GEMM_TILE + 1];
	size_t li = get_local_id(0), lj = get_local_id(1);
	size_t i = get_global_id(0), j = get_global_id(1);
	size_t i0 = i - li, j0 = j - lj;
	uint k = transA ? anx : any;
	REAL acc = 0;
	for (uint p0 = 0; p0 < k; p0 += GEMM_TILE) {
		// as[r][c] = op(A)(i0+r, p0+c); bs[r][c] = op(B)(p0+r, j0+c).
		size_t r = i0 + li, c = p0 + lj;
		REAL a = 0, b = 0;
		if (r < m && c < k)
			a = transA ? A[c + r * lda] : A[r + c * lda];
		as[li][lj] = a;
		r = p0 + li;
		c = j0 + lj;
		if (r < k && c < n)
			b = transB ? B[c + r * ldb] : B[r + c * ldb];
		bs[li][lj] = b;
		barrier(CLK_LOCAL_MEM_FENCE);
		for (uint t = 0; t < GEMM_TILE; t++)
			acc += as[li][t] * bs[t][lj];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (i < m && j < n) {
		global REAL *cij = C + i + j * ldc;
		*cij = beta == 0 ? alpha * acc : alpha * acc + beta * *cij;
	}
}

// C (n x n) = alpha*op(A)*op(A)^T + beta*C on the lower (or upper) triangle;
// op(A) is n x k: A itself, or A^T when trans.
kernel void K(syrk)(global const REAL *A, uint anx, uint any, uint lda,
		global REAL *C, uint n, uint cny, uint ldc,
		int lower, int trans, REAL alpha, REAL beta) {
	size_t i = get_global_id(0), j = get_global_id(1);
	if (i >= n || j >= n || (lower ? i < j : i > j))
		return;
	uint k = trans ? anx : any;
	REAL acc = 0;
	for (uint p = 0; p < k; p++) {
		REAL x = trans ? A[p + i * lda] : A[i + p * lda];
		REAL y = trans ? A[p + j * lda] : A[j + p * lda];
		acc += x * y;
	}
	global REAL *cij = C + i + j * ldc;
	*cij = beta == 0 ? alpha * acc : alpha * acc + beta * *cij;
}

// B (m x n) = X solving op(A)*X = alpha*B (left) or X*op(A) = alpha*B
// (right), A triangular. One work item per column of B (left) or per row
// (right): they are independent substitutions.
kernel void K(trsm)(global const REAL *A, uint anx, uint any, uint lda,
		global REAL *B, uint m, uint n, uint ldb,
		int right, int lower, int trans, int unit, REAL alpha) {
	size_t g = get_global_id(0);
#define OPA(r, c) (trans ? A[(c) + (size_t)(r) * lda] : A[(r) + (size_t)(c) * lda])
	// op(A) is lower triangular when A is lower and not transposed, or
	// upper and transposed.
	int low = (lower != 0) != (trans != 0);
	if (!right) {
		if (g >= n)
			return;
		global REAL *x = B + g * ldb;
		if (low) {
			for (long i = 0; i < m; i++) {
				REAL s = alpha * x[i];
				for (long p = 0; p < i; p++)
					s -= OPA(i, p) * x[p];
				x[i] = unit ? s : s / OPA(i, i);
			}
		} else {
			for (long i = (long)m - 1; i >= 0; i--) {
				REAL s = alpha * x[i];
				for (long p = i + 1; p < m; p++)
					s -= OPA(i, p) * x[p];
				x[i] = unit ? s : s / OPA(i, i);
			}
		}
	} else {
		if (g >= m)
			return;
		global REAL *x = B + g;
		// Row g of X: x_j*op(A)(j,j) = alpha*b_j - sum of x_p*op(A)(p,j)
		// over the other p of column j's triangle.
		if (!low) {
			for (long j = 0; j < n; j++) {
				REAL s = alpha * x[j * ldb];
				for (long p = 0; p < j; p++)
					s -= x[p * ldb] * OPA(p, j);
				x[j * ldb] = unit ? s : s / OPA(j, j);
			}
		} else {
			for (long j = (long)n - 1; j >= 0; j--) {
				REAL s = alpha * x[j * ldb];
				for (long p = j + 1; p < n; p++)
					s -= x[p * ldb] * OPA(p, j);
				x[j * ldb] = unit ? s : s / OPA(j, j);
			}
		}
	}
#undef OPA
}

// Sparse matrix-vector products, y = A*x, with the names of
// plugins/iface-csr/csr and plugins/iface-bcsr/bcsr. A is a plugin
// interface's datum: its parts nzval, colind and rowptr as buffers, then
// its layout (nnz, nrow, firstentry, the region's length, the tag) as
// ulong. One work item per element of y. The host checks the shapes; it
// cannot read rowptr and colind on the device, so a row that they place
// outside A or x is NaN instead of reading out of bounds. Contraction is
// off so that each row's sum rounds as the CPU kernel's does.

// A is a CSR matrix or row block: y has nrow elements.
kernel void K(spmv_csr)(global const REAL *nzval, global const uint *colind, global const uint *rowptr,
		ulong nnz, ulong nrow, ulong first, ulong ld, ulong tag,
		global const REAL *x, uint nx, global REAL *y, uint ny) {
#pragma OPENCL FP_CONTRACT OFF
	size_t r = get_global_id(0);
	if (r >= ny || r >= nrow)
		return;
	ulong lo = rowptr[r], hi = rowptr[r + 1];
	if (lo < first || hi < lo || hi - first > nnz) {
		y[r] = NAN;
		return;
	}
	REAL s = 0;
	for (ulong k = lo - first; k < hi - first; k++) {
		uint c = colind[k];
		if (c >= nx) {
			s = NAN;
			break;
		}
		s += nzval[k] * x[c];
	}
	y[r] = s;
}

// A is a BCSR matrix or block-row range of r x c row-major blocks (r and c
// in the tag's high bits): y has nrow*r elements.
kernel void K(spmv_bcsr)(global const REAL *nzval, global const uint *colind, global const uint *rowptr,
		ulong nnz, ulong nrow, ulong first, ulong ld, ulong tag,
		global const REAL *x, uint nx, global REAL *y, uint ny) {
#pragma OPENCL FP_CONTRACT OFF
	size_t i = get_global_id(0);
	ulong r = (tag >> 32) & 0xffff, c = tag >> 48;
	if (i >= ny || r == 0 || i / r >= nrow)
		return;
	size_t br = i / r, bi = i % r;
	ulong lo = rowptr[br], hi = rowptr[br + 1];
	if (lo < first || hi < lo || hi - first > nnz) {
		y[i] = NAN;
		return;
	}
	REAL s = 0;
	for (ulong k = lo - first; k < hi - first; k++) {
		ulong col = (ulong)colind[k] * c;
		if (col + c > nx) {
			s = NAN;
			break;
		}
		global const REAL *row = nzval + (k * r + bi) * c;
		REAL b = 0;
		for (ulong j = 0; j < c; j++)
			b += row[j] * x[col + j];
		s += b;
	}
	y[i] = s;
}

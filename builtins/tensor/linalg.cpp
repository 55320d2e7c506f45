// Linear algebra: products, transposes, and the torch.linalg decompositions. Decompositions
// follow torch.linalg (not the deprecated torch.svd/torch.eig): several results come back as a
// list in PyTorch's order, e.g. (tensor-svd a) => (U S Vh) with A = U diag(S) Vh.
// All of them accept batches (leading dimensions) as PyTorch does.
#include <ATen/ATen.h>
#include "builtins/tensor/util.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"

namespace purple {

void registerTensorLinalg(Registry& r) {
  // ---- products ----
  r.def("tensor-matmul", "(a b)",
        [](const at::Tensor& a, const at::Tensor& b) { return at::matmul(a, b); },
        "The matrix product of A and B, with PyTorch's rules for 1-d operands (dot and "
        "matrix-vector products) and broadcasting of batch dimensions.");
  r.def("tensor-mm", "(a b)", [](const at::Tensor& a, const at::Tensor& b) { return at::mm(a, b); },
        "The product of the matrices A (n x m) and B (m x p), without broadcasting.");
  r.def("tensor-bmm", "(a b)", [](const at::Tensor& a, const at::Tensor& b) { return at::bmm(a, b); },
        "Batched matrix product: A (b x n x m) times B (b x m x p).");
  r.def("tensor-mv", "(a v)", [](const at::Tensor& a, const at::Tensor& v) { return at::mv(a, v); },
        "The product of the matrix A and the vector V.");
  r.def("tensor-dot", "(a b)", [](const at::Tensor& a, const at::Tensor& b) { return at::dot(a, b); },
        "The dot product of the 1-d tensors A and B (a 0-d tensor).");
  r.def("tensor-outer", "(a b)", [](const at::Tensor& a, const at::Tensor& b) { return at::outer(a, b); },
        "The outer product of the 1-d tensors A and B (a matrix).");
  r.def("tensor-cross", "(a b :key (dim -1))",
        [](const at::Tensor& a, const at::Tensor& b, int64_t dim) { return at::linalg_cross(a, b, dim); },
        "The cross product of 3-vectors along :dim (default the last).");
  r.def("tensor-kron", "(a b)", [](const at::Tensor& a, const at::Tensor& b) { return at::kron(a, b); },
        "The Kronecker product of A and B.");
  r.def("tensor-einsum", "(equation . operands)",
        [](std::string equation, TensorList ops) { return at::einsum(equation, ops.items); },
        "Einstein summation: (tensor-einsum \"ij,jk->ik\" a b). OPERANDS are tensors, or one list of them.");

  // ---- transposes and matrix parts ----
  r.def("tensor-transpose", "(x dim0 dim1)",
        [](const at::Tensor& x, int64_t d0, int64_t d1) { return at::transpose(x, d0, d1); },
        "A view of X with dimensions DIM0 and DIM1 swapped: (tensor-transpose x 0 1).");
  r.def("tensor-t", "(x)", [](const at::Tensor& x) { return at::t(x); },
        "The transpose of a matrix X (a 0-d or 1-d X is returned as is).");
  r.def("tensor-trace", "(x)", [](const at::Tensor& x) { return at::trace(x); },
        "The sum of the diagonal of the matrix X.");
  r.def("tensor-diag", "(x :key (diagonal 0))",
        [](const at::Tensor& x, int64_t k) { return at::diag(x, k); },
        "For a 1-d X, the square matrix with X on diagonal :diagonal; for a matrix, that diagonal as 1-d.");
  r.def("tensor-diagonal", "(x :key (offset 0) (dim1 0) (dim2 1))",
        [](const at::Tensor& x, int64_t offset, int64_t d1, int64_t d2) { return at::diagonal(x, offset, d1, d2); },
        "A view of the diagonal of X over dimensions :dim1 and :dim2 (shifted by :offset).");
  r.def("tensor-diag-embed", "(x :key (offset 0))",
        [](const at::Tensor& x, int64_t offset) { return at::diag_embed(x, offset); },
        "Matrices with the last dimension of X on their diagonal (batched tensor-diag).");
  r.def("tensor-tril", "(x :key (diagonal 0))",
        [](const at::Tensor& x, int64_t k) { return at::tril(x, k); },
        "The lower triangle of X (on and below diagonal :diagonal), zeros elsewhere.");
  r.def("tensor-triu", "(x :key (diagonal 0))",
        [](const at::Tensor& x, int64_t k) { return at::triu(x, k); },
        "The upper triangle of X (on and above diagonal :diagonal), zeros elsewhere.");

  // ---- decompositions and solvers ----
  r.def("tensor-det", "(a)", [](const at::Tensor& a) { return at::linalg_det(a); },
        "The determinant of the square matrix A (or of each matrix in a batch).");
  r.def("tensor-slogdet", "(a)", [](const at::Tensor& a) { return at::linalg_slogdet(a); },
        "A list (sign logabsdet): the sign and log of the absolute value of the determinant of A.");
  r.def("tensor-inverse", "(a)", [](const at::Tensor& a) { return at::linalg_inv(a); },
        "The inverse of the square matrix A (an error when A is singular).");
  r.def("tensor-pinverse", "(a :key (rcond 1e-15))",
        [](const at::Tensor& a, double rcond) { return at::pinverse(a, rcond); },
        "The Moore-Penrose pseudo-inverse of A.");
  r.def("tensor-matrix-power", "(a n)",
        [](const at::Tensor& a, int64_t n) { return at::linalg_matrix_power(a, n); },
        "The square matrix A to the integer power N (negative N inverts).");
  r.def("tensor-matrix-rank", "(a :key hermitian)",
        [](const at::Tensor& a, bool hermitian) {
          return at::linalg_matrix_rank(a, c10::optional<double>(), c10::optional<double>(), hermitian);
        },
        "The numerical rank of A (an int64 tensor).");
  r.def("tensor-solve", "(a b :key (left #t))",
        [](const at::Tensor& a, const at::Tensor& b, bool left) { return at::linalg_solve(a, b, left); },
        "The solution X of A X = B (or X A = B with :left #f). B may be a vector or a matrix.");
  r.def("tensor-lstsq", "(a b)",
        [](const at::Tensor& a, const at::Tensor& b) { return std::get<0>(at::linalg_lstsq(a, b)); },
        "The least-squares solution X minimising |A X - B|.");
  r.def("tensor-svd", "(a :key (full-matrices #t))",
        [](const at::Tensor& a, bool full) { return at::linalg_svd(a, full); },
        "The singular value decomposition of A as a list (U S Vh), A = U diag(S) Vh, as "
        "torch.linalg.svd: S is descending; :full-matrices #f gives the reduced U and Vh.");
  r.def("tensor-svdvals", "(a)", [](const at::Tensor& a) { return at::linalg_svdvals(a); },
        "The singular values of A, in descending order.");
  r.def("tensor-eig", "(a)", [](const at::Tensor& a) { return at::linalg_eig(a); },
        "A list (eigenvalues eigenvectors) of the square matrix A, both complex (see tensor-real, "
        "tensor-imag); the columns of the second are the eigenvectors.");
  r.def("tensor-eigvals", "(a)", [](const at::Tensor& a) { return at::linalg_eigvals(a); },
        "The (complex) eigenvalues of the square matrix A.");
  r.def("tensor-eigh", "(a :key (uplo \"L\"))",
        [](const at::Tensor& a, std::string uplo) { return at::linalg_eigh(a, uplo); },
        "A list (eigenvalues eigenvectors) of the symmetric (Hermitian) matrix A: real eigenvalues "
        "in ascending order, eigenvectors as columns. :uplo \"U\" reads the upper triangle.");
  r.def("tensor-eigvalsh", "(a :key (uplo \"L\"))",
        [](const at::Tensor& a, std::string uplo) { return at::linalg_eigvalsh(a, uplo); },
        "The real eigenvalues, ascending, of the symmetric (Hermitian) matrix A.");
  r.def("tensor-qr", "(a :key (mode \"reduced\"))",
        [](const at::Tensor& a, std::string mode) { return at::linalg_qr(a, mode); },
        "The QR decomposition of A as a list (Q R), A = Q R with Q orthonormal columns and R upper "
        "triangular. :mode \"complete\" gives a square Q; \"r\" computes only R (Q is empty).");
  r.def("tensor-cholesky", "(a :key upper)",
        [](const at::Tensor& a, bool upper) { return at::linalg_cholesky(a, upper); },
        "The Cholesky factor L of the symmetric positive-definite A, A = L L^T (with :upper #t, "
        "U such that A = U^T U).");

  // ---- products with an added term (BLAS's beta C + alpha A B) ----
  r.def("tensor-addmm", "(input mat1 mat2 :key (beta 1) (alpha 1))",
        [](const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, at::Scalar beta, at::Scalar alpha) {
          return at::addmm(c, a, b, beta, alpha);
        },
        "BETA INPUT + ALPHA (MAT1 @ MAT2) for matrices MAT1 (n, m) and MAT2 (m, p); INPUT broadcasts to (n, p) "
        "(torch.addmm).");
  r.def("tensor-addmv", "(input mat vec :key (beta 1) (alpha 1))",
        [](const at::Tensor& c, const at::Tensor& a, const at::Tensor& v, at::Scalar beta, at::Scalar alpha) {
          return at::addmv(c, a, v, beta, alpha);
        },
        "BETA INPUT + ALPHA (MAT @ VEC) for a matrix (n, m) and a vector (m) (torch.addmv).");
  r.def("tensor-baddbmm", "(input batch1 batch2 :key (beta 1) (alpha 1))",
        [](const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, at::Scalar beta, at::Scalar alpha) {
          return at::baddbmm(c, a, b, beta, alpha);
        },
        "BETA INPUT + ALPHA (BATCH1 @ BATCH2), batch by batch, for BATCH1 (b, n, m) and BATCH2 (b, m, p); INPUT "
        "broadcasts to (b, n, p) (torch.baddbmm).");
  r.def("tensor-addbmm", "(input batch1 batch2 :key (beta 1) (alpha 1))",
        [](const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, at::Scalar beta, at::Scalar alpha) {
          return at::addbmm(c, a, b, beta, alpha);
        },
        "BETA INPUT + ALPHA (sum over the batch of BATCH1[i] @ BATCH2[i]) (torch.addbmm).");
  r.def("tensor-cdist", "(x1 x2 :key (p 2.0) compute-mode)",
        [](const at::Tensor& a, const at::Tensor& b, double p, std::optional<std::string> mode) {
          if (a.dim() < 2 || b.dim() < 2 || a.size(-1) != b.size(-1))
            throwError("value-error", "tensor-cdist: x1 and x2 must be (..., P, M) and (..., R, M) with the same M");
          if (p < 0) throwError("value-error", "tensor-cdist: p must be non-negative");
          c10::optional<int64_t> m;
          if (mode) {
            std::string s = *mode;
            for (char& ch : s) ch = ch == '-' ? '_' : ch;
            if (s == "use_mm_for_euclid_dist_if_necessary") m = 0;
            else if (s == "use_mm_for_euclid_dist") m = 1;
            else if (s == "donot_use_mm_for_euclid_dist") m = 2;
            else throwError("value-error", "tensor-cdist: :compute-mode must be \"use_mm_for_euclid_dist_if_necessary\", "
                                           "\"use_mm_for_euclid_dist\" or \"donot_use_mm_for_euclid_dist\", got \"" + *mode + "\"");
          }
          return at::cdist(a, b, p, m);
        },
        "The :p-norm distances between each row of X1 (..., P, M) and each row of X2 (..., R, M): a (..., P, R) tensor "
        "(torch.cdist). :compute-mode chooses whether Euclidean distances use a matrix product, as in PyTorch.");
}

}  // namespace purple

/* mlp (tern_mlp) on the cpu handler: its two matmuls in order (tern_mlp_products), each
 * as cpu_matmul answers it. The hidden activations are written to f->hidden. */
#include "cpu.h"

tern_error *cpu_mlp(tern_dev *d, tern_buf y, tern_buf x, tern_buf w1, tern_buf w2, const tern_mlp *f) {
    tern_matmul first, second;
    tern_mlp_products(f, &first, &second);
    TERN_TRY(tern_error_wrap(cpu_matmul(d, f->hidden, x, w1, &first), "mlp"));
    return tern_error_wrap(cpu_matmul(d, y, f->hidden, w2, &second), "mlp");
}

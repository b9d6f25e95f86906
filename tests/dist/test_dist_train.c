/* Data-parallel training equals one process with the same global batch (run with 2 ranks
 * under the MPI launcher): each rank trains GPT-2 "tiny" on its half of each global batch of
 * 4 rows, with the model's communicator attached; rank 0 then trains the same model alone on
 * the 4 rows. Per step, the losses and, at the end, every parameter must agree, and both
 * ranks must hold identical parameters. On the cpu handler, fp32 and bf16. Then ZeRO-1
 * against the run without it, for GPT-2 and the Llama family. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "check.h"
#include "tern/dist.h"
#include "tern/file.h"
#include "tern/gpt2.h"
#include "tern/llama.h"

#define GLOBAL_B 4
#define SEQ 16
#define STEPS 4
#define ACCUM 2

/* Token t of the (made-up) data: a fixed hash, the same on every rank. */
static int32_t token(size_t t, int vocab) {
    uint64_t x = t * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return (int32_t)(x % (uint64_t)vocab);
}

/* Rows [row0, row0 + rows) of global batch k (GLOBAL_B rows of SEQ + 1 tokens, llm.c's
 * layout: row i of batch k starts at token (k * GLOBAL_B + i) * SEQ). */
static void batch(size_t k, int row0, int rows, int vocab, int32_t *x, int32_t *y) {
    for (int i = 0; i < rows; i++)
        for (int t = 0; t < SEQ; t++) {
            size_t at = (k * GLOBAL_B + (size_t)(row0 + i)) * SEQ + (size_t)t;
            x[i * SEQ + t] = token(at, vocab);
            y[i * SEQ + t] = token(at + 1, vocab);
        }
}

/* Every parameter, flattened in a fixed order; *count receives the total. */
static float *read_params(tern_gpt2 *m, size_t *count) {
    const tern_gpt2_config *c = tern_gpt2_get_config(m);
    size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size;
    static const char *const layer_names[] = {
        "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
        "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
        "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    const size_t layer_sizes[] = {C, C, C * 3 * C, 3 * C, C * C, C, C, C, C * 4 * C, 4 * C, 4 * C * C, C};
    size_t total = V * C + (size_t)c->max_seq * C + 2 * C;
    for (int k = 0; k < 12; k++) total += layer_sizes[k] * (size_t)c->n_layer;
    float *all = malloc(total * sizeof *all), *at = all;
    if (!all) return NULL;
    CHECK_OK(tern_gpt2_read_param(m, "wte.weight", at, V * C));
    at += V * C;
    CHECK_OK(tern_gpt2_read_param(m, "wpe.weight", at, (size_t)c->max_seq * C));
    at += (size_t)c->max_seq * C;
    char name[96];
    for (int l = 0; l < c->n_layer; l++)
        for (int k = 0; k < 12; k++) {
            snprintf(name, sizeof name, "h.%d.%s", l, layer_names[k]);
            CHECK_OK(tern_gpt2_read_param(m, name, at, layer_sizes[k]));
            at += layer_sizes[k];
        }
    CHECK_OK(tern_gpt2_read_param(m, "ln_f.weight", at, C));
    at += C;
    CHECK_OK(tern_gpt2_read_param(m, "ln_f.bias", at, C));
    *count = total;
    return all;
}

/* Steps [from, to) of ACCUM micro-batches of `rows` rows from row0 of each global batch;
 * losses[s - from] receives step s's mean loss. */
static void run_steps(tern_gpt2 *m, int from, int to, int row0, int rows, bool decay_all,
                      float *losses) {
    int vocab = tern_gpt2_get_config(m)->vocab_size;
    int32_t x[GLOBAL_B * SEQ], y[GLOBAL_B * SEQ];
    tern_gpt2_adamw h = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                         .weight_decay = 0.1f, .clip = 1.0f, .decay_all = decay_all};
    for (int s = from; s < to; s++) {
        CHECK_OK(tern_gpt2_zero_grad(m));
        losses[s - from] = 0;
        for (int a = 0; a < ACCUM; a++) {
            float loss = 0;
            batch((size_t)(s * ACCUM + a), row0, rows, vocab, x, y);
            CHECK_OK(tern_gpt2_forward_backward(m, x, y, rows, SEQ, 1.0f / ACCUM, &loss));
            losses[s - from] += loss / ACCUM;
        }
        CHECK_OK(tern_gpt2_update(m, &h, NULL));
    }
}

/* GPT-2 "tiny" from seed 7 on the cpu handler, with the communicator (may be NULL) attached
 * and, with zero1, its optimizer state sharded across the ranks. */
static tern_gpt2 *open_tiny(tern_dist *comm, tern_precision precision, bool zero1) {
    tern_gpt2_config cfg;
    tern_gpt2 *m = NULL;
    CHECK_OK(tern_gpt2_config_named("tiny", &cfg));
    CHECK_OK(tern_gpt2_init("cpu", &cfg, 7, precision, &m));
    if (!m) return NULL;
    CHECK_OK(tern_gpt2_set_dist(m, comm));
    if (zero1) CHECK_OK(tern_gpt2_shard_optimizer(m));
    return m;
}

/* STEPS optimizer steps of ACCUM micro-batches of `rows` rows from row0 of each global
 * batch; losses[s] receives step s's mean loss. Returns the parameters. */
static float *train(tern_dist *comm, int row0, int rows, tern_precision precision, float *losses,
                    size_t *count) {
    tern_gpt2 *m = open_tiny(comm, precision, false);
    if (!m) return NULL;
    run_steps(m, 0, STEPS, row0, rows, true, losses);
    float *params = read_params(m, count);
    tern_gpt2_free(m);
    return params;
}

static void compare(tern_dist *comm, tern_precision precision, double loss_tol, double param_tol) {
    int rank = tern_dist_rank(comm), world = tern_dist_world(comm);
    const char *p = tern_precision_name(precision);
    float dist_losses[STEPS], ref_losses[STEPS];
    size_t n = 0, n_ref = 0;
    int rows = GLOBAL_B / world;
    float *mine = train(comm, rank * rows, rows, precision, dist_losses, &n);
    if (!mine) return;

    /* The ranks hold the same parameters: their sum is exactly twice this rank's. */
    float *sum = malloc(n * sizeof *sum);
    if (sum) {
        memcpy(sum, mine, n * sizeof *sum);
        CHECK_OK(tern_dist_allreduce_host(comm, sum, n, TERN_F32));
        size_t differ = 0;
        for (size_t i = 0; i < n; i++) differ += sum[i] != (float)world * mine[i];
        CHECKF(differ == 0, "%s: %zu of %zu parameters differ between the ranks", p, differ, n);
        free(sum);
    }

    if (rank == 0) {
        float *ref = train(NULL, 0, GLOBAL_B, precision, ref_losses, &n_ref);
        CHECK(n_ref == n);
        double worst = 0;
        for (int s = 0; s < STEPS; s++) worst = fmax(worst, fabs(dist_losses[s] - ref_losses[s]));
        CHECKF(worst <= loss_tol, "%s: losses differ by %.3g (tolerance %.1g)", p, worst, loss_tol);
        double e = ref && n_ref == n ? check_rel_error(mine, ref, n) : INFINITY;
        CHECKF(e <= param_tol, "%s: parameters differ by %.3g relative (tolerance %.1g)", p, e, param_tol);
        printf("%s: %d ranks of %d rows vs 1 of %d after %d steps: loss %.3g apart, parameters "
               "%.3g relative\n", p, world, rows, GLOBAL_B, STEPS, worst, e);
        free(ref);
    }
    free(mine);
}

/* ---- ZeRO-1 ---- */

#define MORE 2 /* steps after a checkpoint */

/* A folder every rank knows: rank 0 makes it, and its name reaches rank 1 through a sum
 * (rank 1 adds zeros; ASCII codes are exact in f32). */
static void shared_dir(tern_dist *comm, char *path, size_t cap) {
    char name[] = "/tmp/tern-zero1-XXXXXX";
    float code[sizeof name] = {0};
    if (tern_dist_rank(comm) == 0) {
        CHECK(mkdtemp(name) != NULL);
        for (size_t i = 0; i < sizeof name; i++) code[i] = (float)name[i];
    }
    CHECK_OK(tern_dist_allreduce_host(comm, code, sizeof name, TERN_F32));
    for (size_t i = 0; i < sizeof name; i++) name[i] = (char)code[i];
    snprintf(path, cap, "%s", name);
}

/* Waits until every rank got here. */
static void barrier(tern_dist *comm) {
    float one = 1;
    CHECK_OK(tern_dist_allreduce_host(comm, &one, 1, TERN_F32));
}

/* Whether two files have the same bytes. */
static bool same_file(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    CHECK_OK(tern_read_file(a, &x, &nx));
    CHECK_OK(tern_read_file(b, &y, &ny));
    bool same = x && y && nx == ny && !memcmp(x, y, nx);
    free(x);
    free(y);
    return same;
}

/* The model and its optimizer state into dir (every rank calls; rank 0 writes). */
static void save(tern_gpt2 *m, const char *dir, char *opt, size_t cap) {
    snprintf(opt, cap, "%s/optimizer.safetensors", dir);
    CHECK_OK(tern_gpt2_save(m, dir));
    CHECK_OK(tern_gpt2_save_optimizer(m, opt, NULL));
}

static void remove_checkpoint(const char *dir) {
    static const char *const files[] = {"config.json", "model.safetensors", "optimizer.safetensors"};
    char path[512];
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* Bitwise equality of two runs' losses and parameters. */
static void check_same(const char *what, const float *la, const float *lb, int n_losses,
                       tern_gpt2 *a, tern_gpt2 *b) {
    size_t na = 0, nb = 0;
    float *pa = read_params(a, &na), *pb = read_params(b, &nb);
    CHECKF(!memcmp(la, lb, (size_t)n_losses * sizeof *la), "%s: the losses differ", what);
    size_t differ = 0;
    for (size_t i = 0; pa && pb && na == nb && i < na; i++) differ += memcmp(&pa[i], &pb[i], sizeof *pa) != 0;
    CHECKF(pa && pb && na == nb && differ == 0, "%s: %zu of %zu parameters differ", what, differ, na);
    free(pa);
    free(pb);
}

/* A model opened from a checkpoint, with its optimizer state. */
static tern_gpt2 *resume(tern_dist *comm, const char *dir, const char *opt, tern_precision p, bool zero1) {
    tern_gpt2 *m = NULL;
    CHECK_OK(tern_gpt2_load("cpu", dir, p, &m));
    if (!m) return NULL;
    CHECK_OK(tern_gpt2_set_dist(m, comm));
    if (zero1) CHECK_OK(tern_gpt2_shard_optimizer(m));
    CHECK_OK(tern_gpt2_load_optimizer(m, opt));
    return m;
}

/* 2 ranks with ZeRO-1 against 2 ranks without it. The arithmetic is the same (the same
 * gradient sum and norm, AdamW element by element on each rank's part, the parts gathered
 * unchanged), so losses and parameters are bitwise equal, and so are the checkpoints both
 * write. ZeRO-1's checkpoint resumed on 2 ranks with ZeRO-1 continues bitwise as the run
 * itself; resumed on 1 rank of the whole global batch, within the tolerances of compare(). */
static void compare_zero1(tern_dist *comm, tern_precision precision, bool decay_all,
                          double loss_tol, double param_tol) {
    int rank = tern_dist_rank(comm), world = tern_dist_world(comm), rows = GLOBAL_B / world;
    char what[64], dir[64], plain_dir[96], zero_dir[96], plain_opt[128], zero_opt[128];
    snprintf(what, sizeof what, "ZeRO-1, %s%s", tern_precision_name(precision),
             decay_all ? "" : ", no decay on 1-d tensors");
    tern_gpt2 *plain = open_tiny(comm, precision, false), *zero = open_tiny(comm, precision, true);
    if (!plain || !zero) goto done;

    /* m and v (and the bf16 run's master low halves) shrink to 1/world, less the padding. */
    size_t pb = tern_gpt2_optimizer_bytes(plain), zb = tern_gpt2_optimizer_bytes(zero);
    CHECKF(zb * (size_t)world >= pb && zb <= pb / (size_t)world + 3 * 64 * sizeof(float),
           "%s: %zu bytes of optimizer state per rank, %zu without ZeRO-1", what, zb, pb);

    float la[STEPS + MORE], lb[STEPS + MORE], lc[MORE];
    run_steps(plain, 0, STEPS, rank * rows, rows, decay_all, la);
    run_steps(zero, 0, STEPS, rank * rows, rows, decay_all, lb);
    check_same(what, la, lb, STEPS, plain, zero);

    shared_dir(comm, dir, sizeof dir);
    snprintf(plain_dir, sizeof plain_dir, "%s/plain", dir);
    snprintf(zero_dir, sizeof zero_dir, "%s/zero1", dir);
    save(plain, plain_dir, plain_opt, sizeof plain_opt);
    save(zero, zero_dir, zero_opt, sizeof zero_opt);
    barrier(comm);
    if (rank == 0) {
        char plain_model[128], zero_model[128];
        snprintf(plain_model, sizeof plain_model, "%s/model.safetensors", plain_dir);
        snprintf(zero_model, sizeof zero_model, "%s/model.safetensors", zero_dir);
        CHECKF(same_file(plain_opt, zero_opt), "%s: the optimizer files differ", what);
        CHECKF(same_file(plain_model, zero_model), "%s: the model files differ", what);
    }

    /* Resumed on 2 ranks with ZeRO-1: bitwise the continued run. */
    tern_gpt2 *again = resume(comm, zero_dir, zero_opt, precision, true);
    run_steps(zero, STEPS, STEPS + MORE, rank * rows, rows, decay_all, lb);
    if (again) {
        run_steps(again, STEPS, STEPS + MORE, rank * rows, rows, decay_all, lc);
        check_same(what, lb, lc, MORE, zero, again);
        tern_gpt2_free(again);
    }
    /* Resumed on 1 rank with the global batch: the continued run, but for the order of sums.
     * Every rank reads the sharded model's parameters (in bf16 a gather). */
    tern_gpt2 *one = rank == 0 ? resume(NULL, zero_dir, zero_opt, precision, false) : NULL;
    if (one) run_steps(one, STEPS, STEPS + MORE, 0, GLOBAL_B, decay_all, lc);
    size_t n = 0, n_one = 0;
    float *p_zero = read_params(zero, &n), *p_one = one ? read_params(one, &n_one) : NULL;
    if (rank == 0) {
        double worst = 0;
        for (int s = 0; s < MORE; s++) worst = fmax(worst, fabs(lb[s] - lc[s]));
        double e = p_zero && p_one && n == n_one ? check_rel_error(p_one, p_zero, n) : INFINITY;
        CHECKF(worst <= loss_tol && e <= param_tol, "%s: resumed on 1 rank: losses %.3g apart, "
               "parameters %.3g (tolerances %.1g, %.1g)", what, worst, e, loss_tol, param_tol);
    }
    free(p_zero);
    free(p_one);
    tern_gpt2_free(one);
    barrier(comm);
    if (rank == 0) {
        remove_checkpoint(plain_dir);
        remove_checkpoint(zero_dir);
        rmdir(dir);
        printf("%s: %d ranks with and without it: losses and parameters bitwise equal, "
               "checkpoints identical; %zu bytes of optimizer state per rank instead of %zu\n",
               what, world, zb, pb);
    }
done:
    tern_gpt2_free(plain);
    tern_gpt2_free(zero);
}

/* The model refuses ZeRO-1 once training started, and a new communicator after it. */
static void check_zero1_errors(tern_dist *comm) {
    tern_gpt2 *m = open_tiny(comm, TERN_PRECISION_FP32, false);
    if (!m) return;
    float losses[1];
    run_steps(m, 0, 1, tern_dist_rank(comm) * 2, 2, true, losses);
    CHECK_ERR(tern_gpt2_shard_optimizer(m), "ZeRO-1: the optimizer state must be sharded before training starts");
    tern_gpt2_free(m);
    m = open_tiny(comm, TERN_PRECISION_FP32, true);
    if (m) CHECK_ERR(tern_gpt2_set_dist(m, NULL), "the communicator cannot change once ZeRO-1");
    tern_gpt2_free(m);
    /* One rank: nothing to shard. */
    tern_gpt2 *alone = open_tiny(NULL, TERN_PRECISION_BF16, true);
    m = open_tiny(NULL, TERN_PRECISION_BF16, false);
    if (m && alone) CHECK(tern_gpt2_optimizer_bytes(alone) == tern_gpt2_optimizer_bytes(m));
    /* bf16 holds the f32 master as the bf16 weights plus a u16 of low halves: 10 bytes of
     * optimizer state a parameter (m, v and the low halves) against fp32's 8 (m and v; the
     * f32 weights are the master). */
    tern_gpt2 *fp32 = open_tiny(NULL, TERN_PRECISION_FP32, false);
    if (m && fp32)
        CHECKF(tern_gpt2_optimizer_bytes(m) * 8 == tern_gpt2_optimizer_bytes(fp32) * 10,
               "bf16: %zu bytes of optimizer state, fp32: %zu", tern_gpt2_optimizer_bytes(m),
               tern_gpt2_optimizer_bytes(fp32));
    tern_gpt2_free(fp32);
    tern_gpt2_free(alone);
    tern_gpt2_free(m);
}

/* The Llama family's ZeRO-1 is the same flat state's (models/common): "tiny" on 2 ranks with
 * and without it, 1-d tensors not decayed (AdamW tensor by tensor, cut at the parts' ends):
 * bitwise equal losses, embedding (read back through read_param, a gather in bf16) and
 * checkpoints, and about half the optimizer state per rank. */
static void compare_llama_zero1(tern_dist *comm, tern_precision precision) {
    int rank = tern_dist_rank(comm), world = tern_dist_world(comm), rows = GLOBAL_B / world;
    const char *what = precision == TERN_PRECISION_BF16 ? "Llama ZeRO-1, bf16" : "Llama ZeRO-1, fp32";
    tern_llama_config cfg;
    CHECK_OK(tern_llama_config_named("tiny", &cfg));
    tern_llama *runs[2] = {NULL, NULL}; /* without, with ZeRO-1 */
    float losses[2][STEPS];
    float *embed[2] = {NULL, NULL};
    size_t n_embed = (size_t)cfg.vocab_size * cfg.hidden;
    char dir[64], sub[2][96], opt[2][128];
    shared_dir(comm, dir, sizeof dir);
    tern_gpt2_adamw h = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                         .weight_decay = 0.1f, .clip = 1.0f, .decay_all = false};
    for (int z = 0; z < 2; z++) {
        CHECK_OK(tern_llama_init("cpu", &cfg, 7, precision, &runs[z]));
        if (!runs[z]) goto done;
        CHECK_OK(tern_llama_set_dist(runs[z], comm));
        if (z) CHECK_OK(tern_llama_shard_optimizer(runs[z]));
        int32_t x[GLOBAL_B * SEQ], y[GLOBAL_B * SEQ];
        for (int s = 0; s < STEPS; s++) {
            CHECK_OK(tern_llama_zero_grad(runs[z]));
            losses[z][s] = 0;
            for (int a = 0; a < ACCUM; a++) {
                float loss = 0;
                batch((size_t)(s * ACCUM + a), rank * rows, rows, cfg.vocab_size, x, y);
                CHECK_OK(tern_llama_forward_backward(runs[z], x, y, rows, SEQ, 1.0f / ACCUM, &loss));
                losses[z][s] += loss / ACCUM;
            }
            CHECK_OK(tern_llama_update(runs[z], &h, NULL));
        }
        embed[z] = malloc(n_embed * sizeof *embed[z]);
        if (embed[z]) CHECK_OK(tern_llama_read_param(runs[z], "model.embed_tokens.weight", embed[z], n_embed));
        snprintf(sub[z], sizeof sub[z], "%s/%s", dir, z ? "zero1" : "plain");
        snprintf(opt[z], sizeof opt[z], "%s/optimizer.safetensors", sub[z]);
        CHECK_OK(tern_llama_save(runs[z], sub[z])); /* every rank: rank 0 writes */
        CHECK_OK(tern_llama_save_optimizer(runs[z], opt[z], NULL));
    }
    CHECK_ERR(tern_llama_shard_optimizer(runs[0]), "ZeRO-1: the optimizer state must be sharded before training starts");
    size_t pb = tern_llama_optimizer_bytes(runs[0]), zb = tern_llama_optimizer_bytes(runs[1]);
    CHECKF(zb * (size_t)world >= pb && zb <= pb / (size_t)world + 3 * 64 * sizeof(float),
           "%s: %zu bytes of optimizer state per rank, %zu without ZeRO-1", what, zb, pb);
    CHECKF(!memcmp(losses[0], losses[1], sizeof losses[0]), "%s: the losses differ", what);
    CHECKF(embed[0] && embed[1] && !memcmp(embed[0], embed[1], n_embed * sizeof *embed[0]),
           "%s: the embeddings differ", what);
    barrier(comm);
    if (rank == 0) {
        char model[2][128];
        for (int z = 0; z < 2; z++) snprintf(model[z], sizeof model[z], "%s/model.safetensors", sub[z]);
        CHECKF(same_file(opt[0], opt[1]), "%s: the optimizer files differ", what);
        CHECKF(same_file(model[0], model[1]), "%s: the model files differ", what);
        for (int z = 0; z < 2; z++) remove_checkpoint(sub[z]);
        rmdir(dir);
        printf("%s: %d ranks with and without it: losses and embedding bitwise equal, checkpoints "
               "identical; %zu bytes of optimizer state per rank instead of %zu\n", what, world, zb, pb);
    }
done:
    for (int z = 0; z < 2; z++) {
        free(embed[z]);
        tern_llama_free(runs[z]);
    }
}

int main(void) {
    tern_dist *comm = NULL;
    CHECK_OK(tern_dist_open(&comm));
    if (!comm) return check_summary("test_dist_train");
    CHECKF(tern_dist_world(comm) == 2, "world %d: run me with 2 ranks", tern_dist_world(comm));
    /* fp32: the ranks sum their halves' gradients after each half's own sums, so only the
     * order of float additions differs (~1e-7 relative per sum; measured 1.8e-7 on the
     * parameters after 4 steps, losses equal): tolerance 1e-5. bf16 rounds each half's
     * gradients to 8 bits before the sum, and the bf16 weights follow the f32 masters by
     * rounding: measured 2e-4 on the losses and 7e-4 on the parameters; tolerances 2e-3 and
     * 5e-3. */
    compare(comm, TERN_PRECISION_FP32, 1e-5, 1e-5);
    compare(comm, TERN_PRECISION_BF16, 2e-3, 5e-3);
    compare_zero1(comm, TERN_PRECISION_FP32, true, 1e-5, 1e-5);
    compare_zero1(comm, TERN_PRECISION_FP32, false, 1e-5, 1e-5);
    compare_zero1(comm, TERN_PRECISION_BF16, false, 2e-3, 5e-3);
    check_zero1_errors(comm);
    compare_llama_zero1(comm, TERN_PRECISION_FP32);
    compare_llama_zero1(comm, TERN_PRECISION_BF16);
    int status = check_summary(tern_dist_rank(comm) ? "test_dist_train (rank 1)" : "test_dist_train (rank 0)");
    tern_dist_close(comm);
    return status;
}

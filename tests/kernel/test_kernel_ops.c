/* Every DSL feature (the zoo) on the runtime TERN_GPU names (host when unset), against
 * plain C with fresh random inputs and poisoned outputs. Run twice with different seeds. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "zoo.h"

int main(void) {
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(NULL, &rt);
    if (err) {
        fprintf(stderr, "test_kernel_ops: %s\n", tern_error_message(err));
        tern_error_free(err);
        return 1;
    }
    printf("runtime %s (%s)\n", tern_rt_name(rt), tern_rt_device(rt));
    /* fresh inputs each run; the seed is printed so a failure can be replayed */
    uint64_t seed = getenv("TERN_TEST_SEED") ? strtoull(getenv("TERN_TEST_SEED"), NULL, 0)
                                             : (uint64_t)time(NULL) * 2654435761u + 1;
    printf("seed %llu\n", (unsigned long long)seed);
    for (int c = 0; c < zoo_count; c++) {
        const zoo_case *z = &zoo_cases[c];
        tern_kernel *k = NULL;
        err = tern_kernel_build(z->name, z->trace, z->user, &k);
        CHECK_OK(err);
        if (!k) continue;
        for (int rep = 0; rep < 2; rep++) {
            zoo_rng r = {seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(2 * c + rep + 1))};
            int bad = z->run(rt, k, &r);
            CHECKF(bad == 0, "case %s on %s: %d mismatches", z->name, tern_rt_name(rt), bad);
        }
        tern_kernel_free(k);
    }
    tern_rt_close(rt);
    return check_summary("test_kernel_ops");
}

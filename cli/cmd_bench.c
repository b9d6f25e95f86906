#include "cli.h"

int tern_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail(tern_errorf("bench: not built yet"));
}

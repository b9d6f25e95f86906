#include "cli.h"

int tern_cmd_generate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail(tern_errorf("generate: not built yet"));
}

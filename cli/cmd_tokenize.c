#include "cli.h"

int tern_cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail(tern_errorf("tokenize: not built yet"));
}

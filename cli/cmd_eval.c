#include "cli.h"

int tern_cmd_eval(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail(tern_errorf("eval: not built yet"));
}

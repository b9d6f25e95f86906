#include "cli.h"

int tern_cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail(tern_errorf("info: not built yet"));
}

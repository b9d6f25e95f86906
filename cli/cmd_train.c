#include "cli.h"

int tern_cmd_train(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail(tern_errorf("train: not built yet"));
}

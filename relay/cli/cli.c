/* cli.c - operator commands, clients of the REST API. runs on: main thread. */
#include "relay/commands.h"

#include <stdio.h>
#include <string.h>

int cli_main(const char *cmd, int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: statusrelay %s ...\n(not yet implemented)\n", cmd);
            return 0;
        }
    fprintf(stderr, "statusrelay %s: not yet implemented\n", cmd);
    return EXIT_NOTYET;
}

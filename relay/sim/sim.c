/* sim.c - `statusrelay sim` (placeholder until the simulator lands). */
#include "relay/commands.h"

#include <stdio.h>

int sim_main(int argc, char **argv)
{
    fprintf(stderr, "statusrelay sim: not yet implemented\n");
    return EXIT_NOTYET;
}

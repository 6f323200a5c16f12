/* sim_search.c - see sim_search.h. */
#include "relay/sim/sim_search.h"

#include <string.h>
#include <strings.h>

static int same(const char *a, const char *term)
{
    return a != NULL && a[0] != '\0' && strcasecmp(a, term) == 0;
}

int sim_term_match(const struct sim_req *r, const char *term)
{
    if (strcmp(r->id, term) == 0 || same(r->user, term) || same(r->recipient, term))
        return 1;
    for (int i = 0; i < r->nin; i++)
        if (same(r->in[i].hash, term))
            return 1;
    for (int i = 0; i < r->nout; i++)
        if (same(r->out[i].hash, term))
            return 1;
    return r->dep != NULL && (same(r->dep->address, term) || same(r->dep->depositor, term) ||
                              same(r->dep->tx_hash, term));
}

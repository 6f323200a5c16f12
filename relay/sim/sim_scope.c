/* sim_scope.c - see sim_scope.h. runs on: the simulator's lws thread. */
#include "relay/sim/sim_scope.h"
#include "relay/sim/sim.h"
#include "relay/sim/sim_model.h"

#include <string.h>

int sim_scope_match(const struct sim *s, const struct sim_req *r, const char *keys)
{
    const char *own = r->api_key[0] != '\0' ? r->api_key : s->cfg.api_key;
    if (own == NULL)
        return 0;
    size_t n = strlen(own);
    for (const char *p = keys; *p != '\0';) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, own, n) == 0)
            return 1;
        if (e == NULL)
            break;
        p = e + 1;
    }
    return 0;
}

/* sim_facts.c - see sim_facts.h. runs on: the simulator's lws thread. */
#include "relay/sim/sim_facts.h"
#include "relay/sim/sim_json.h"
#include "relay/sim/sim_model.h"

#include <stdint.h>

/* One fee: {"usd", "amount", "amountFormatted"} (the upstream's shape; amounts in wei). */
static void fee(struct sbuf *b, const char *name, int64_t wei, int full)
{
    sbuf_addf(b, "\"%s\":{\"usd\":\"-%d.%06d\"", name, (int)(wei / 1000000000000000000LL),
              (int)(wei / 1000000000000LL % 1000000));
    if (full) {
        sbuf_adds(b, ",\"amount\":\"");
        sbuf_jint(b, wei);
        sbuf_addf(b, "\",\"amountFormatted\":\"%d.%06d\"", (int)(wei / 1000000000000000000LL),
                  (int)(wei / 1000000000000LL % 1000000));
    }
    sbuf_add(b, "}", 1);
}

static void fee_set(struct sbuf *b, const struct sim_req *r, int actual)
{
    /* the actual execution cost differs a little from the quote, as gas prices move */
    int64_t swap = r->amount_wei / 500, exec = r->amount_wei / 2000;
    if (actual)
        exec -= exec / 10;
    sbuf_add(b, "{", 1);
    fee(b, "swap", swap, 1);
    sbuf_add(b, ",", 1);
    fee(b, "execution", exec, 1);
    sbuf_add(b, ",", 1);
    fee(b, "platform", 0, 1);
    sbuf_adds(b, ",\"app\":{\"usd\":\"0.000000\",\"amount\":\"0\",\"amountFormatted\":\"0\"}}");
}

void sim_facts_fees(struct sbuf *b, const struct sim_req *r)
{
    sbuf_adds(b, "{\"quoted\":");
    fee_set(b, r, 0);
    sbuf_adds(b, ",\"actual\":");
    if (r->nout > 0)
        fee_set(b, r, 1);
    else
        sbuf_add(b, "null", 4);
    sbuf_adds(b, ",\"currency\":{\"chainId\":");
    sbuf_jint(b, r->origin);
    sbuf_adds(b, ",\"address\":\"0x0000000000000000000000000000000000000000\",\"symbol\":\"ETH\","
                 "\"name\":\"Ether\",\"decimals\":18}}");
}

int sim_facts_route_actual(const struct sim_req *r)
{
    return r->nin > 0;
}

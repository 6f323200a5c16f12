/* sim_lifecycle.c - see sim_lifecycle.h. runs on: the simulator's lws thread. */
#include "relay/sim/sim_lifecycle.h"
#include "relay/sim/sim_rand.h"
#include "relay/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reason a template step sets: none (keep the request's), a random refundable one, a
 * random final one (with refundFailReason and details), or a fixed one; RK_REORG also
 * reorgs the deposit. */
enum reason_kind { RK_NONE, RK_REFUNDABLE, RK_FINAL, RK_REORG, RK_DOUBLE_SPEND, RK_CAPACITY };

struct tmpl_step {
    const char *status;
    int pct; /* of --step before entering this step (first step: 0) */
    enum reason_kind reason;
};

struct tmpl {
    const char *name;
    int deposit;     /* deposit-address request */
    int64_t origin;  /* fixed origin chain, 0 = random */
    int nsteps;
    struct tmpl_step steps[8];
};

static const struct tmpl tmpls[] = {
    {"success", 0, 0, 4, {{"waiting", 0, RK_NONE}, {"pending", 100, RK_NONE}, {"submitted", 100, RK_NONE}, {"success", 50, RK_NONE}}},
    {"depositing", 0, 0, 4,
     {{"depositing", 0, RK_NONE}, {"pending", 60, RK_NONE}, {"submitted", 100, RK_NONE}, {"success", 50, RK_NONE}}},
    {"delayed", 0, 0, 5,
     {{"waiting", 0, RK_NONE}, {"pending", 100, RK_NONE}, {"delayed", 150, RK_NONE}, {"submitted", 400, RK_NONE}, {"success", 50, RK_NONE}}},
    {"refund", 0, 0, 5,
     {{"waiting", 0, RK_NONE},
      {"pending", 100, RK_NONE},
      {"failure", 150, RK_REFUNDABLE},
      {"pending", 40, RK_NONE},
      {"refund", 120, RK_NONE}}},
    {"failure", 0, 0, 3, {{"waiting", 0, RK_NONE}, {"pending", 100, RK_NONE}, {"failure", 150, RK_FINAL}}},
    {"deposit-address", 1, 0, 4,
     {{"waiting", 0, RK_NONE}, {"pending", 200, RK_NONE}, {"submitted", 100, RK_NONE}, {"success", 50, RK_NONE}}},
    {"solana", 0, 792703809, 4,
     {{"waiting", 0, RK_NONE}, {"pending", 60, RK_NONE}, {"submitted", 80, RK_NONE}, {"success", 40, RK_NONE}}},
    /* Settled, then taken back: the deposit's block is reorganised away. */
    {"reorg", 0, 0, 5,
     {{"waiting", 0, RK_NONE},
      {"pending", 100, RK_NONE},
      {"submitted", 100, RK_NONE},
      {"success", 50, RK_NONE},
      {"failure", 300, RK_REORG}}},
    /* Settled, then refunded: the deposit was spent twice. */
    {"double-spend", 0, 0, 5,
     {{"waiting", 0, RK_NONE},
      {"pending", 100, RK_NONE},
      {"submitted", 100, RK_NONE},
      {"success", 50, RK_NONE},
      {"refund", 300, RK_DOUBLE_SPEND}}},
    /* Failed, refunded long after (10x --step). */
    {"late-refund", 0, 0, 4,
     {{"waiting", 0, RK_NONE},
      {"pending", 100, RK_NONE},
      {"failure", 150, RK_CAPACITY},
      {"refund", 1000, RK_NONE}}},
    /* The deposit never comes: waiting for good (the path ends at once). */
    {"never-deposited", 0, 0, 1, {{"waiting", 0, RK_NONE}}},
};
_Static_assert(ARRAY_LEN(tmpls) == SIM_NTMPL, "SIM_NTMPL counts the templates");

/* Space-separated names of the built-in lifecycles. */
static const char *sim_model_lifecycles(void)
{
    return "success depositing delayed refund failure deposit-address solana reorg double-spend "
           "late-refund never-deposited";
}

static const char *const refundable_reasons[] = {
    "SOLVER_CAPACITY_EXCEEDED", "DEPOSITED_AMOUNT_TOO_LOW_TO_FILL", "ORDER_EXPIRED", "SLIPPAGE",
    "TRANSACTION_REVERTED", "EXECUTION_REVERTED", "DOUBLE_SPEND", "TTL_EXPIRED",
};
static const char *const final_reasons[] = {"SLIPPAGE", "EXECUTION_REVERTED", "TOO_LITTLE_RECEIVED"};
static const char *const final_details[] = {
    "Fill simulation reverted: output below quoted minimum",
    "execution reverted: TRANSFER_FROM_FAILED",
    "Fill transaction reverted on destination",
};

int sim_tmpl_find(const char *name)
{
    for (int i = 0; i < SIM_NTMPL; i++)
        if (strcmp(tmpls[i].name, name) == 0)
            return i;
    return -1;
}

const char *sim_tmpl_name(int ti)
{
    return tmpls[ti].name;
}

int sim_tmpl_deposit(int ti)
{
    return tmpls[ti].deposit;
}

int64_t sim_tmpl_origin(int ti)
{
    return tmpls[ti].origin;
}

int sim_tmpl_mix_parse(const char *mix, int w[SIM_NTMPL], int *total_out, char *err, size_t errn)
{
    int total = 0;
    memset(w, 0, SIM_NTMPL * sizeof(*w));
    char buf[512];
    if (mix == NULL || strlen(mix) >= sizeof(buf)) {
        snprintf(err, errn, "expected name:weight,... with names %s", sim_model_lifecycles());
        return -1;
    }
    strcpy(buf, mix);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        char *colon = strchr(t, ':');
        long weight = 1;
        if (colon != NULL) {
            *colon = '\0';
            char *end;
            weight = strtol(colon + 1, &end, 10);
            if (*end != '\0' || colon[1] == '\0' || weight < 0 || weight > 1000000) {
                snprintf(err, errn, "bad weight for %s", t);
                return -1;
            }
        }
        int i = sim_tmpl_find(t);
        if (i < 0) {
            snprintf(err, errn, "unknown lifecycle \"%s\" (known: %s)", t,
                     sim_model_lifecycles());
            return -1;
        }
        w[i] += (int)weight;
        total += (int)weight;
    }
    if (total <= 0) {
        snprintf(err, errn, "the weights add up to zero");
        return -1;
    }
    *total_out = total;
    return 0;
}

struct sim_step *sim_tmpl_path(int ti, int64_t step_ms, uint64_t *rng, int *nsteps)
{
    const struct tmpl *t = &tmpls[ti];
    const char *reason = refundable_reasons[sim_rng_below(rng, ARRAY_LEN(refundable_reasons))];
    struct sim_step *steps = xcalloc((size_t)t->nsteps, sizeof(*steps));
    for (int i = 0; i < t->nsteps; i++) {
        const struct tmpl_step *ts = &t->steps[i];
        struct sim_step *s = &steps[i];
        s->status = ts->status;
        if (ts->reason == RK_REFUNDABLE) {
            s->fail_reason = reason;
        } else if (ts->reason == RK_FINAL) {
            s->fail_reason = final_reasons[sim_rng_below(rng, ARRAY_LEN(final_reasons))];
            s->refund_fail_reason = "AMOUNT_TOO_LOW_TO_REFUND";
            s->details = final_details[sim_rng_below(rng, ARRAY_LEN(final_details))];
        } else if (ts->reason == RK_REORG) {
            s->fail_reason = SIM_REORG_REASON;
            s->reorg = 1;
        } else if (ts->reason == RK_DOUBLE_SPEND) {
            s->fail_reason = "DOUBLE_SPEND";
        } else if (ts->reason == RK_CAPACITY) {
            s->fail_reason = "SOLVER_CAPACITY_EXCEEDED";
        }
        if (i == 0 || step_ms <= 0)
            s->delay_ms = i == 0 ? 0 : -1;
        else /* pct of the step, with +-50% jitter */
            s->delay_ms =
                (int64_t)((double)step_ms * ts->pct / 100.0 * (0.5 + sim_rng_unit(rng)));
    }
    *nsteps = t->nsteps;
    return steps;
}

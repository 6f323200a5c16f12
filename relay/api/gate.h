/* gate.h (api) - the REST port's connection gate (see gate.c): a filtering bufferevent that
 * reads each request head before evhttp does, judges it (admit.h) and passes, refuses or cuts
 * it. The listener (listen.c) makes one per connection and is told of each head through
 * on_head, so the gate knows nothing above it. runs on: core thread. */
#ifndef RELAY_API_GATE_H
#define RELAY_API_GATE_H

#include <stdint.h>

struct admit_rules;
struct bufferevent;
struct event_base;
struct proto_rest_head;

/* What every gate of a listener reads; borrowed by each gate for its life (the owner keeps it
 * until evhttp_free has closed the connections). */
struct gate_opts {
    const struct admit_rules *rules; /* the body cap of each head (admit_decide) */
    int64_t request_timeout_ms;      /* STATUSRELAY_HTTP_REQUEST_TIMEOUT: head and body whole */
    int64_t keepalive_requests;      /* STATUSRELAY_HTTP_KEEPALIVE_REQUESTS per connection */
    /* Each parsed head, before it is judged: 0 to go on, -1 to close the connection, 1 to
     * answer it 503 server_busy (its body dropped) and close the connection after. */
    int (*on_head)(void *arg, struct bufferevent *bev, const struct proto_rest_head *h);
    void *arg;
};

/* The evhttp bevcb's bufferevent for one new connection: a filter over a socket bufferevent,
 * owned by evhttp's connection (which frees it, and the gate with it). Never NULL (allocation
 * aborts). */
struct bufferevent *api_gate_bev_new(struct event_base *base, const struct gate_opts *o);

#endif

/* proxy.h (api) - the pass-through (see proxy.c): requests for paths we do not serve, forwarded
 * to the upstream verbatim. on_request (server.c) sends it the requests admission judged
 * ADMIT_PROXY. runs on: core thread. */
#ifndef RELAY_API_PROXY_H
#define RELAY_API_PROXY_H

#include "relay/api/internal.h"

/* Forward x to the upstream and answer with its answer (takes x, see route_cb). */
route_cb api_proxy;
/* The connection evcon is being freed: its pass-through answers are no longer waiting. */
void api_proxy_conn_closed(struct api *a, struct evhttp_connection *evcon);
/* Release every pass-through answer left (api_free, after evhttp_free). */
void api_proxy_free(struct api *a);

#endif

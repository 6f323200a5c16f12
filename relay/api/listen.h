/* listen.h (api) - the REST listener (see listen.c): binds the port, makes each connection's
 * gate (gate.h), counts connections against the caps, and tells its owner (server.c) of each
 * connection's close through a hook, so it calls nothing above it. runs on: core thread. */
#ifndef RELAY_API_LISTEN_H
#define RELAY_API_LISTEN_H

struct api;
struct api_listen;
struct evhttp_connection;
struct evhttp_request;
struct proto_ip;

/* Told once when a REST connection is freed, after the listener counted it closed. */
typedef void api_conn_close_cb(struct evhttp_connection *evcon, void *arg);

/* Bind host:port with a listener counted against cfg->http_max_connections and paused on
 * descriptor exhaustion; each connection's gate judges heads by a->rules. on_close(evcon, arg)
 * is called when a connection closes. Sets a->lsn and a->sock. 0, or -1 after one log line. */
int api_listen_start(struct api *a, const char *host, int port, api_conn_close_cb *on_close,
                     void *arg);
/* Make sure evcon's close reaches the listener and the hook (a request may come before the
 * listener's own zero-delay step installed it). NULL-safe on l. */
void api_listen_watch(struct api_listen *l, struct evhttp_connection *evcon);
/* The client address of req into out: its peer, or when the peer is a trusted proxy, the
 * client its X-Forwarded-For / Forwarded names (the proxy on a malformed value, logged).
 * 0, or -1 when unknown (out zeroed). */
int api_client_addr(struct api *a, struct evhttp_request *req, struct proto_ip *out);
/* The bound socket is about to be freed (api_stop_accepting): no more pause/resume. */
void api_listen_stop(struct api_listen *l);
/* Free after evhttp_free (which closes the connections). NULL-safe. */
void api_listen_free(struct api_listen *l);

#endif

/* sim_ws.h - the simulator's websocket server: the upstream's status protocol on
 * ws://HOST:PORT/ (ready greeting, subscribe/unsubscribe by filters.id with acks, events only
 * for subscribed ids), plus the websocket faults: drop every connection (abruptly or with a
 * close code), silence, delay, duplicates, reordering, malformed frames, refused upgrades.
 *
 * Each event is serialised once into a refcounted frame and queued on every subscribed
 * connection; a connection writes as many queued frames per WRITEABLE callback as the socket
 * takes. A connection whose queue exceeds --ws-max-queue is closed with 1008.
 * runs on: the simulator's lws thread. */
#ifndef RELAY_SIM_WS_H
#define RELAY_SIM_WS_H

#include <libwebsockets.h>
#include <stddef.h>
#include <stdint.h>

struct sim;
struct sbuf;

enum sim_frame_kind { SIM_FRAME_EVENT, SIM_FRAME_ACK, SIM_FRAME_READY, SIM_FRAME_MALFORMED };

/* One websocket message with LWS_PRE headroom, shared by every connection it is queued on. */
struct sim_frame {
    int refs;
    int binary;
    enum sim_frame_kind kind;
    int64_t due_ms; /* mono ms before which it must not be sent (delay fault); 0 = now */
    size_t len;
    unsigned char *buf; /* LWS_PRE + len bytes, heap */
};

/* A frame from b (which must have been sbuf_init(b, LWS_PRE)); takes b's buffer. refs = 1. */
struct sim_frame *sim_frame_new(struct sbuf *b, int binary, enum sim_frame_kind kind);

struct sim_ws;

struct sim_ws *sim_ws_new(struct sim *s);
/* Cancel timers; call before lws_context_destroy (which then closes the connections). */
void sim_ws_stop(struct sim_ws *ws);
/* Free what is left; after lws_context_destroy. NULL-safe. */
void sim_ws_free(struct sim_ws *ws);

/* The lws protocol callback and its per-session size (protocols[1] in sim.c, the vhost's
 * default protocol for upgrades without Sec-WebSocket-Protocol). */
int sim_ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len);
size_t sim_ws_session_size(void);

/* 1 when some connection subscribed to id. */
int sim_ws_subscribed(const struct sim_ws *ws, const char *id);
/* Queue an event frame for every subscriber of id, applying the duplicate and reorder
 * faults. Takes the caller's reference to f. */
void sim_ws_publish(struct sim_ws *ws, const char *id, struct sim_frame *f);
/* Drop every open connection: close_code 0 = abruptly (TCP shutdown, no close frame), else
 * a close frame with that code. Returns the number of connections dropped. */
int sim_ws_drop_all(struct sim_ws *ws, int close_code);
/* Queue n malformed frames (of assorted kinds) on every open connection. Returns the number
 * of connections that got them. */
int sim_ws_send_malformed(struct sim_ws *ws, int n);
/* Open connections and active subscriptions (for /_sim/stats). */
size_t sim_ws_connections(const struct sim_ws *ws);
size_t sim_ws_subscriptions(const struct sim_ws *ws);

#endif

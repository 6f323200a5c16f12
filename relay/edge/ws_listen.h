/* ws_listen.h - the dashboard port's listening socket, accepted by us rather than by
 * libwebsockets, so that accepting pauses instead of spinning.
 *
 * libwebsockets 4.1 accepts on its own listen socket with no connection cap of ours, and when
 * accept() fails with anything but EAGAIN (EMFILE: out of descriptors) it logs
 * "accept: errno 24" and returns with the socket still readable: the ws thread spins and the
 * log floods. So the dashboard vhost is created without a listen socket
 * (CONTEXT_PORT_NO_LISTEN_SERVER); we bind and listen ourselves, hand the listening socket to
 * lws as a raw file descriptor (its readability comes back as LWS_CALLBACK_RAW_RX_FILE on the
 * ws thread's poll), accept there and adopt each connection (lws_adopt_socket_vhost: the
 * same HTTP/websocket server path lws's own listener takes). Pausing is
 * lws_rx_flow_control on that descriptor; the count of open connections comes from the
 * vhost's LWS_CALLBACK_WSI_CREATE / LWS_CALLBACK_WSI_DESTROY, seen by a thin wrapper around
 * the dashboard protocol's callback. Cap, backoff and the rate-limited log line are
 * relay/common/accept_guard.h (listener=ws).
 * Why not lws's own knobs: fd_limit_per_thread below `ulimit -n` switches lws 4.1 to a linear
 * fd lookup (lws_plat_init's "slow" mode) and its accept modulation (listen POLLIN off when
 * its fd table is one short of full) counts only lws's descriptors, not the process's; and no
 * lws option changes the EMFILE path above. lws sizes its fd table by sysconf(_SC_OPEN_MAX)
 * when the context is created, which is why serve raises RLIMIT_NOFILE before that.
 * runs on: ws_listen_new/ws_listen_protocols/ws_listen_attach on the thread that creates the
 * lws context (before the ws thread exists); everything else on the ws thread. */
#ifndef RELAY_EDGE_WS_LISTEN_H
#define RELAY_EDGE_WS_LISTEN_H

#include <stdint.h>
#include <sys/socket.h>

struct lws_context;
struct lws_protocols;
struct lws_vhost;
struct ws_listen;

/* Bind and listen on sa (port 0: any free port) for at most cap connections. NULL after one
 * log line naming `name` (the setting's text) (address in use, unusable). */
struct ws_listen *ws_listen_new(const struct sockaddr *sa, socklen_t len, int64_t cap,
                                const char *name);
/* Per address (accept_guard.h): at most per_address (0: any) connections per client address
 * key (IPv4, IPv6 /64) are accepted; a connection past it is closed at accept. A peer in
 * trusted (copied; NULL: none) is not counted at accept: its upgrade request names the client
 * counted instead (ws_listen_count_client). Before ws_listen_attach. */
struct proto_cidr_list;
void ws_listen_set_policy(struct ws_listen *l, int64_t per_address,
                          const struct proto_cidr_list *trusted);
/* wsi (a connection of a trusted proxy) serves client key from now on: its address count
 * moves there. 0, or -1 when key is at its cap (nothing counted: refuse the request). */
struct lws;
int ws_listen_count_client(struct lws *wsi, const char *key);
/* The port bound. */
int ws_listen_port(const struct ws_listen *l);
/* protos[0] is the dashboard protocol (ws_server_protocol): its callback is wrapped to count
 * connections; protos[1] becomes the accept protocol; protos[2] must be the terminator. Pass
 * l as the vhost's user (lws_context_creation_info.user) and create the vhost with
 * CONTEXT_PORT_NO_LISTEN_SERVER. */
void ws_listen_protocols(struct ws_listen *l, struct lws_protocols *protos);
/* Hand the listening socket to lws on vhost vh of ctx: accepting starts with the ws thread's
 * service loop. 0, or -1 after one log line (the socket is closed). */
int ws_listen_attach(struct ws_listen *l, struct lws_context *ctx, struct lws_vhost *vh);
/* Shutdown: accept nothing more (ws thread). */
void ws_listen_stop(struct ws_listen *l);
/* Free after lws_context_destroy (which closed the adopted socket). NULL-safe. */
void ws_listen_free(struct ws_listen *l);

#endif

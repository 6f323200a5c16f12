/* httpc.h - the daemon's one outbound HTTP client: libcurl multi driven by the core
 * event_base (status polls of the upstream, webhook deliveries, `webhooks test`).
 *
 * What every request gets, whatever the caller asks:
 *   - http and https only; redirects are never followed (a 3xx is just a status);
 *   - no proxy, whatever http_proxy/https_proxy say (addr_check must see the real target);
 *   - no Accept-Encoding (bodies are counted as sent: no decompression bombs);
 *   - TLS peer and host verification unless tls_insecure; HTTP/2 when a TLS server offers
 *     it (ALPN), HTTP/1.1 otherwise; connections kept alive and reused (and HTTP/2 streams
 *     multiplexed) across requests to the same host; no signals (CURLOPT_NOSIGNAL);
 *   - a hard total deadline, counted from httpc_request (queueing for a connection slot
 *     included), enforced by httpc itself as well as by curl;
 *   - a bounded response: max_response bytes are kept, up to max_drain more are read and
 *     thrown away (so the connection stays reusable), and a body beyond both is cut off with
 *     err "too_large" (the connection is closed). A Content-Length announcing more fails at
 *     once. Memory per request is bounded by max_response whatever the server sends, and a
 *     hostile server (huge body, one byte a second, never answering) only ever costs its own
 *     request's deadline: every socket is serviced from the event loop, nothing blocks.
 *
 * Completion: the callback runs exactly once per accepted request, on the core thread, from
 * the event loop (never from inside httpc_request nor from inside a curl callback). It may
 * free the caller's objects, start new requests, and even call httpc_free.
 *
 * Cost: one pooled easy handle, body buffer and header list (nodes and text) per request in
 * flight (no allocation of ours per request in steady state); curl
 * itself holds ~20 KB per transfer in flight. No logging on the request path. Create the
 * event_base with EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST: curl unwatches and rewatches a
 * keep-alive socket between two requests, and the changelist folds those epoll_ctl calls
 * (+60% requests/s measured with tests/helpers/httpc_probe).
 * runs on: core thread only. */
#ifndef RELAY_HTTPC_H
#define RELAY_HTTPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct event_base;
struct httpc;

/* Named transport errors (resp->err; compare by pointer or strcmp). NULL err means the
 * server answered with a complete HTTP response, whatever its status. */
extern const char httpc_err_timeout[];    /* "timeout": total deadline or connect timeout */
extern const char httpc_err_connect[];    /* "connect": refused, unreachable, no route */
extern const char httpc_err_resolve[];    /* "resolve": the host name did not resolve */
extern const char httpc_err_forbidden[];  /* "forbidden_target": addr_check refused every
                                             address the name resolved to, or the peer of
                                             the keep-alive connection to be reused */
extern const char httpc_err_tls[];        /* "tls": handshake or certificate failure */
extern const char httpc_err_too_large[];  /* "too_large": body over max_response + max_drain */
extern const char httpc_err_closed[];     /* "closed": connection closed or reset before the
                                             response was complete */
extern const char httpc_err_protocol[];   /* "protocol": malformed HTTP from the server, or
                                             a response head over 96 KiB (curl's "out of
                                             memory" on an oversized field included) */
extern const char httpc_err_bad_url[];    /* "bad_url": malformed URL or not http/https */
extern const char httpc_err_shutdown[];   /* "shutdown": httpc_free with the request in flight */
extern const char httpc_err_internal[];   /* "internal": anything else */
extern const char httpc_err_local[];      /* "local_resource": this process could not open a
                                             socket or allocate (EMFILE, ENFILE, ENOBUFS,
                                             ENOMEM; curl out of memory before the request
                                             went out): nothing reached the server */

/* Outcome classes for the stats; HTTPC_OK is "an HTTP answer" (err == NULL). */
enum httpc_outcome {
    HTTPC_OK = 0,
    HTTPC_E_TIMEOUT,
    HTTPC_E_CONNECT,
    HTTPC_E_RESOLVE,
    HTTPC_E_FORBIDDEN,
    HTTPC_E_TLS,
    HTTPC_E_TOO_LARGE,
    HTTPC_E_CLOSED,
    HTTPC_E_PROTOCOL,
    HTTPC_E_BAD_URL,
    HTTPC_E_SHUTDOWN,
    HTTPC_E_INTERNAL,
    HTTPC_E_LOCAL,
    HTTPC_OUTCOME_COUNT
};
/* "ok" or the error string of an outcome (metrics labels); "unknown" out of range. */
const char *httpc_outcome_name(int outcome);

struct httpc_opts {
    long max_total_conns;   /* open connections at most, all hosts; 0 = unlimited. Requests
                               beyond wait for a slot (their deadline keeps running) */
    long max_host_conns;    /* per host:port; 0 = unlimited */
    const char *user_agent; /* copied; NULL = "statusrelay" */
    unsigned max_idle;      /* easy handles kept for reuse; 0 = 64 */
};

/* Create on base (the core loop). Calls curl_global_init once per process if nobody did
 * (main should call it before starting threads). NULL after logging on failure. */
struct httpc *httpc_new(struct event_base *base, const struct httpc_opts *opts);

/* Complete every request in flight with err "shutdown" (their callbacks run now, and
 * httpc_request fails from then on), close every connection and free. NULL-safe. May be
 * called from a completion callback (the free then happens when that callback returns). */
void httpc_free(struct httpc *h);

/* The SSRF guard, on the address actually connected to: called with each address the name
 * resolved to just before connecting to it (no connection is attempted to a refused one),
 * and again with the peer address of the connection the request is about to be sent on (a
 * keep-alive connection opened earlier, possibly by a request without a check, included).
 * Return 0 to allow, nonzero to refuse; a refusal fails the request with "forbidden_target"
 * before any byte of it is sent. Must be cheap and must not call httpc. The signature is
 * protocol/addr.h's proto_addr_forbidden with an arg in front. */
typedef int httpc_addr_check_cb(void *arg, const struct sockaddr *sa, socklen_t len);

struct httpc_req {
    const char *method;             /* "GET" (default when NULL), "POST", "PUT", "HEAD", ...
                                       upper-case letters only */
    const char *url;                /* http:// or https://; copied by curl */
    const char *const *headers;     /* "Name: value" lines, NULL-terminated; may be NULL.
                                       Copied. No CR/LF (refused). "Name:" with no value
                                       removes a header curl would add. */
    const void *body;               /* NOT copied: keep alive until the callback. Pass a
                                       Content-Type header (curl's default for a body is
                                       application/x-www-form-urlencoded). Bodies of 1 MiB and
                                       more are sent after "Expect: 100-continue" */
    size_t body_len;                /* sent when body != NULL or method is POST/PUT/PATCH */
    int64_t connect_timeout_ms;     /* <= 0: 5000 */
    int64_t total_timeout_ms;       /* <= 0: 10000; from httpc_request to the callback */
    size_t max_response;            /* body bytes kept; 0: 1 MiB */
    size_t max_drain;               /* bytes read and discarded beyond max_response before
                                       the transfer is cut with "too_large"; 0: none (any
                                       excess is "too_large"). Webhook deliveries keep 1 KiB
                                       and drain e.g. 64 KiB so chatty 200s stay keep-alive */
    int tls_insecure;               /* 0 (default): verify the peer certificate and name */
    httpc_addr_check_cb *addr_check;  /* NULL: any address */
    void *addr_check_arg;
    int keep_headers;               /* 1: resp->headers holds the response's header fields
                                       (at most HTTPC_HEADERS_MAX bytes, else "too_large") */
};

#define HTTPC_HEADERS_MAX (64 * 1024)

struct httpc_resp {
    const char *err;        /* NULL: an HTTP answer; else one of httpc_err_* */
    const char *detail;     /* static text from curl on a transport error, else NULL */
    long status;            /* the HTTP status; also set with err when the response head
                               had arrived (a "too_large" 200, a "timeout" while the body
                               trickled in), else 0 */
    const char *body;       /* never NULL; NUL-terminated; at most max_response bytes;
                               borrowed: valid during the callback only */
    size_t body_len;
    int truncated;          /* 1 when the body was longer than max_response (and drained) */
    int64_t retry_after_ms; /* Retry-After (delay-seconds or HTTP-date, from now, >= 0);
                               -1 when absent or unparseable */
    int64_t latency_ms;     /* httpc_request to completion */
    const char *content_type; /* borrowed, NULL when absent */
    int http_version;       /* 10, 11, 20; 0 when no response */
    const char *headers;    /* with keep_headers: the final response head's fields, each
                               "Name: value\r\n" as received (no status line, no 1xx heads,
                               no trailers; HTTP/2 names are lower-case), NUL-terminated;
                               borrowed like body. NULL without keep_headers */
    size_t headers_len;
};

/* resp and everything it points to are borrowed for the call only. */
typedef void httpc_done_cb(void *arg, const struct httpc_resp *resp);

/* Start a request. Returns 0: cb(arg, resp) will be called exactly once, later, from the
 * loop. Returns -1 (cb will not be called, nothing was sent): shutting down, NULL url,
 * bad method, CR/LF in a header, or curl refused the handle (logged). Nothing from req is
 * kept except body, which must stay valid until the callback. */
int httpc_request(struct httpc *h, const struct httpc_req *req, httpc_done_cb *cb, void *arg);

struct httpc_stats {
    uint64_t in_flight;   /* accepted, callback not yet called */
    uint64_t started;     /* accepted by httpc_request, total */
    uint64_t completed;   /* callbacks called, total */
    uint64_t outcomes[HTTPC_OUTCOME_COUNT];  /* completed, by outcome */
    uint64_t connects;    /* new connections opened (far below completed: keep-alive works) */
    uint64_t bytes_in;    /* response body bytes read (kept or drained) */
    uint64_t waited;      /* requests that waited in httpc for a connection slot */
    uint64_t peak_curl;   /* most transfers in curl at once (<= max_total_conns, per host
                             <= max_host_conns, except hosts answering over HTTP/2) */
};
/* Copy the counters (for /metrics). */
void httpc_stats(const struct httpc *h, struct httpc_stats *out);

#endif

/* httpc_internal.h - what httpc.c and httpc_cb.c share: the transfer and client structs
 * and the curl callbacks that fill a transfer (httpc_cb.c). Not for use outside httpc.
 * runs on: core thread only. */
#ifndef RELAY_COMMON_HTTPC_INTERNAL_H
#define RELAY_COMMON_HTTPC_INTERNAL_H

#include "relay/common/httpc.h"

#include <curl/curl.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdint.h>

#define DEFAULT_CONNECT_MS 5000
#define DEFAULT_TOTAL_MS 10000
#define DEFAULT_MAX_RESPONSE (1024 * 1024)
#define DEFAULT_MAX_IDLE 64
#define MAX_IDLE_SOCKEVS 256
#define BUF_INITIAL 4096
#define BUF_POOL_MAX (64 * 1024) /* a pooled transfer keeps a body buffer up to this size */
#define METHOD_MAX 16
/* A response head (status line and fields, 1xx heads included) longer than this fails the
 * transfer with "protocol". Under curl's own limits (one field 100 KB, a head 300 KB in
 * 7.88) so that an oversized head is ours to name, not curl's "out of memory". */
#define HEAD_MAX (96 * 1024)

/* X_WAITING: prepared, waiting in httpc for a connection slot of its host (not in curl yet;
 * httpc.c "per-host slots") */
enum xfer_state { X_IDLE = 0, X_WAITING, X_RUNNING, X_DONE, X_CALLING };

struct hostq;

struct xfer {
    struct xfer *next, *prev; /* h->running, h->done or its hostq's wait (both), h->idle
                                 (next only) */
    struct httpc *h;
    struct hostq *hq; /* its host's slots while WAITING or RUNNING; NULL: not limited here */
    int counted;      /* RUNNING on one of h's counted slots (h->counted) */
    int added;        /* in the multi (h->in_curl) */
    CURL *easy;
    struct event deadline;
    enum xfer_state state;
    struct curl_slist *hdrs; /* NULL or &hnode[0]: this request's header lines */
    /* the header list without an allocation per line (issue 26: curl_slist_append was two
     * mallocs per line, ~12 per webhook attempt): nodes and text pooled with the transfer,
     * grown when a request has more; curl only reads a CURLOPT_HTTPHEADER list */
    struct curl_slist *hnode;
    size_t hnode_cap;
    char *htext;
    size_t htext_cap;
    httpc_done_cb *cb;
    void *cb_arg;
    httpc_addr_check_cb *addr_check;
    void *addr_check_arg;
    char *buf; /* kept body, NUL-terminated; pooled */
    size_t len, cap;
    char *hbuf; /* keep_headers: header fields of the current head; pooled */
    size_t hlen, hcap;
    int keep_headers;
    /* the options on easy are those of the last request; a request of the same shape (method,
     * body or none, https, tls_insecure, addr_check or none) only sets what differs per request
     * (URL, timeouts, limits, headers, body), another one resets the handle first (issue 26:
     * curl_easy_reset and ~20 options per request were ~6,000 instructions) */
    int configured;
    unsigned shape;
    /* the URL set (CURLOPT_CURLU), parsed once per URL for every transfer (h's URL cache):
     * a request skips curl's parse of it (~6,000 instructions), also when the pooled
     * transfer last went to another endpoint; NULL when curl parses (CURLOPT_URL) */
    struct urlc *uc;
    char shape_method[METHOD_MAX + 1];
    int head_done; /* the blank line ending the current head was seen */
    size_t keep;      /* max_response */
    uint64_t limit;   /* max_response + max_drain: more is too_large */
    uint64_t total;   /* body bytes read */
    uint64_t head_bytes; /* response head bytes seen (every head, 1xx included) */
    int64_t start_ms;
    int64_t retry_after_ms;
    CURLcode result;
    const char *err;  /* decided by us: too_large, protocol (head over HEAD_MAX), forbidden,
                         timeout (deadline), shutdown */
    int refused;      /* addresses addr_check refused */
    int local_errno;  /* socket() failed for lack of a local resource (EMFILE, ...), else 0 */
    int truncated;
};

struct xlist {
    struct xfer *head, *tail;
};

/* An entry of a keyed table (httpc.c "keyed tables"): the first member of the structs kept
 * in one, its key the text that follows the struct. */
struct knode {
    struct knode *next; /* bucket chain */
    uint32_t hash;      /* of key */
    const char *key;    /* the entry's own text (points into it) */
};

/* A chained hash table of knodes, grown to keep its load factor <= 1. */
struct ktab {
    struct knode **tab;
    size_t cap, n;
};

/* A parsed URL of h's URL cache (httpc.c), shared by the transfers that set it (refs): curl
 * only reads a CURLOPT_CURLU handle (it copies it when a transfer starts). */
struct urlc {
    struct knode kn; /* in h->urls, key = text */
    CURLU *h;
    unsigned refs;
    char text[];
};

/* One host:port of the per-host slots (httpc.c): its transfers in curl and those waiting. */
struct hostq {
    struct knode kn;     /* in h->hosts, key = key */
    struct hostq *rnext; /* h's ready FIFO: hosts with waiters and room of their own */
    struct xlist wait;   /* transfers waiting for a slot, oldest first */
    unsigned running;    /* its transfers in curl */
    int in_ready;
    int mux;             /* its answers came over HTTP/2: curl multiplexes, no host limit */
    char key[];          /* "host:port", host in lower case */
};

struct sockev {
    struct event ev;
    struct sockev *next, *prev; /* h->socks (both), h->free_socks (next only) */
    short kind;
};

struct httpc {
    struct event_base *base;
    CURLM *multi;
    struct event timer;
    struct xlist running, done;
    struct xfer *idle;
    unsigned n_idle, max_idle;
    struct sockev *socks;       /* watched for curl */
    struct sockev *free_socks;  /* pool */
    unsigned n_free_socks;
    char *user_agent;
    struct httpc_stats st;
    /* per-host slots (httpc.c): hosts by key, the ready FIFO, the limits (0: none) and the
     * transfers in curl on counted slots */
    struct ktab hosts;
    struct hostq *ready_head, *ready_tail;
    unsigned long max_host, max_total, counted;
    uint64_t in_curl; /* transfers in the multi (for st.peak_curl) */
    struct ktab urls; /* the URL cache: every URL a transfer holds, and up to URLC_KEEP */
    int closing;      /* httpc_free began: no new requests */
    int dispatching;  /* callbacks are being called: a nested httpc_free defers the free */
    int free_pending;
};

/* curl callbacks (inside curl: they record into the transfer, never call out). Each gets
 * the struct xfer as its data pointer. */
size_t httpc_on_write(char *p, size_t size, size_t n, void *arg);
size_t httpc_on_header(char *p, size_t size, size_t n, void *arg);
curl_socket_t httpc_on_opensocket(void *arg, curlsocktype purpose, struct curl_sockaddr *a);
int httpc_on_prereq(void *arg, char *ip, char *local_ip, int port, int local_port);

#endif

/* httpc_cb.c - the curl callbacks of httpc (see httpc_internal.h): the response body kept
 * up to its bound, the head's fields and Retry-After, and the address checks before a socket
 * is opened and before a request is sent on a (new or reused) connection.
 * runs on: core thread only (inside curl_multi_socket_action). */
#include "relay/common/httpc_internal.h"
#include "relay/common/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

size_t httpc_on_write(char *p, size_t size, size_t n, void *arg)
{
    struct xfer *x = arg;
    size_t len = size * n;

    x->total += len;
    x->h->st.bytes_in += len;
    if (x->len < x->keep) {
        size_t take = x->keep - x->len < len ? x->keep - x->len : len;
        if (x->len + take + 1 > x->cap) {
            size_t cap = x->cap < BUF_INITIAL ? BUF_INITIAL : x->cap;
            while (cap < x->len + take + 1)
                cap *= 2;
            if (cap > x->keep + 1)
                cap = x->keep + 1;
            x->buf = xrealloc(x->buf, cap);
            x->cap = cap;
        }
        memcpy(x->buf + x->len, p, take);
        x->len += take;
        if (take < len)
            x->truncated = 1;
    } else if (len > 0) {
        x->truncated = 1;
    }
    if (x->total > x->limit) {
        x->err = httpc_err_too_large;
        return 0; /* != len: curl stops with CURLE_WRITE_ERROR and closes the connection */
    }
    return len;
}

/* Retry-After: delay-seconds or an HTTP-date, as ms from now (>= 0), -1 if unparseable. */
static int64_t parse_retry_after(const char *v, size_t n)
{
    char tmp[64];
    while (n > 0 && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (n > 0 && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= sizeof(tmp))
        return -1;
    size_t i = 0;
    int64_t secs = 0;
    while (i < n && v[i] >= '0' && v[i] <= '9') {
        if (secs < 100000000) /* cap at ~3 years; anything longer is "very long" anyway */
            secs = secs * 10 + (v[i] - '0');
        i++;
    }
    if (i == n)
        return secs * 1000;
    memcpy(tmp, v, n);
    tmp[n] = '\0';
    time_t t = curl_getdate(tmp, NULL);
    if (t == -1)
        return -1;
    time_t now = time(NULL);
    return t <= now ? 0 : (int64_t)(t - now) * 1000;
}

size_t httpc_on_header(char *p, size_t size, size_t n, void *arg)
{
    struct xfer *x = arg;
    size_t len = size * n;

    x->head_bytes += len;
    if (x->head_bytes > HEAD_MAX) {
        x->err = httpc_err_protocol; /* a hostile head: a failed exchange, not our memory */
        return 0;                    /* != len: curl stops the transfer */
    }
    if (len > 12 && (p[0] | 0x20) == 'r' && strncasecmp(p, "retry-after:", 12) == 0) {
        x->retry_after_ms = parse_retry_after(p + 12, len - 12);
    } else if (len > 5 && memcmp(p, "HTTP/", 5) == 0) {
        x->retry_after_ms = -1; /* a new response head (after a 1xx): forget the last one */
        x->hlen = 0;
        x->head_done = 0;
        return len;
    }
    if (!x->keep_headers || x->head_done)
        return len; /* trailers after the head are not kept */
    if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) {
        x->head_done = 1;
        return len;
    }
    if (x->hlen + len + 1 > HTTPC_HEADERS_MAX) {
        x->err = httpc_err_too_large;
        return 0; /* != len: curl stops the transfer */
    }
    if (x->hlen + len + 1 > x->hcap) {
        size_t cap = x->hcap < 1024 ? 1024 : x->hcap;
        while (cap < x->hlen + len + 1)
            cap *= 2;
        x->hbuf = xrealloc(x->hbuf, cap);
        x->hcap = cap;
    }
    memcpy(x->hbuf + x->hlen, p, len);
    x->hlen += len;
    x->hbuf[x->hlen] = '\0';
    return len;
}

curl_socket_t httpc_on_opensocket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct xfer *x = arg;
    if (x->addr_check != NULL && x->addr_check(x->addr_check_arg, &a->addr, a->addrlen) != 0) {
        x->refused++;
        return CURL_SOCKET_BAD; /* curl tries the next address, else CURLE_COULDNT_CONNECT */
    }
    curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (fd == CURL_SOCKET_BAD &&
        (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM))
        x->local_errno = errno; /* curl reports CURLE_COULDNT_CONNECT: classify() knows */
    return fd;
}

/* Runs once the connection (new or reused) is ready, before the request is sent. */
int httpc_on_prereq(void *arg, char *ip, char *local_ip, int port, int local_port)
{
    struct xfer *x = arg;
    struct sockaddr_storage ss;
    socklen_t len = 0;

    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (ip != NULL && inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        len = sizeof(*s4);
    } else if (ip != NULL && inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        len = sizeof(*s6);
    }
    /* An address we cannot parse (a zone id, a unix socket) fails closed. */
    if (len == 0 || x->addr_check(x->addr_check_arg, (struct sockaddr *)&ss, len) != 0) {
        x->refused++;
        return CURL_PREREQFUNC_ABORT;
    }
    return CURL_PREREQFUNC_OK;
}

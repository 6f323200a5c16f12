/* sim_webhook.c - see sim_webhook.h.
 * runs on: the public functions on the lws thread; worker() on the "sim-webhook" thread,
 * which alone owns the curl multi handle, the HMAC key and the jobs it took from the queue.
 * Shared between them: the input queue and the counters, under one mutex. */
#include "relay/sim/sim_webhook.h"
#include "protocol/sign.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INFLIGHT 16
#define MAX_QUEUED 100000
#define BACKOFF_MAX_MS 60000

struct job {
    char *body;
    size_t len;
    int attempts;
    int64_t due_ms; /* mono */
    CURL *easy;
    struct curl_slist *hdrs;
    struct job *next, *prev;
};

struct sim_webhook {
    char *url;
    int64_t retries, timeout_ms;
    struct proto_hmac *hmac; /* worker only */
    CURLM *multi;
    pthread_t th;
    atomic_int stop;
    pthread_mutex_t mu;
    struct job *in_head, *in_tail; /* from the lws thread (mu) */
    size_t in_count;
    struct sim_webhook_stats st;   /* (mu) */
    /* worker only */
    struct job *fresh_head, *fresh_tail; /* due now, FIFO */
    struct job *retry_head, *retry_tail; /* sorted by due_ms */
    struct job *fly;                     /* attached to the multi handle */
    int inflight;
};

static void job_free(struct job *j)
{
    if (j == NULL)
        return;
    curl_slist_free_all(j->hdrs);
    if (j->easy)
        curl_easy_cleanup(j->easy);
    free(j->body);
    free(j);
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
    return size * n;
}

static void bump(struct sim_webhook *w, uint64_t *counter, int64_t pending_delta)
{
    pthread_mutex_lock(&w->mu);
    if (counter)
        (*counter)++;
    w->st.pending = (uint64_t)((int64_t)w->st.pending + pending_delta);
    pthread_mutex_unlock(&w->mu);
}

static int start(struct sim_webhook *w, struct job *j)
{
    char ts[32], hex[65], h1[64], h2[96];
    snprintf(ts, sizeof(ts), "%lld", (long long)wall_ms());
    if (proto_upstream_sign(w->hmac, ts, j->body, j->len, hex) != 0)
        return -1;
    snprintf(h1, sizeof(h1), "X-Signature-Timestamp: %s", ts);
    snprintf(h2, sizeof(h2), "X-Signature-SHA256: %s", hex);
    curl_slist_free_all(j->hdrs);
    j->hdrs = NULL;
    struct curl_slist *h = NULL;
    if ((h = curl_slist_append(NULL, "Content-Type: application/json")) == NULL)
        return -1;
    j->hdrs = h;
    if (curl_slist_append(h, h1) == NULL || curl_slist_append(h, h2) == NULL ||
        curl_slist_append(h, "User-Agent: statusrelay-sim") == NULL ||
        curl_slist_append(h, "Expect:") == NULL)
        return -1;
    if (j->easy == NULL && (j->easy = curl_easy_init()) == NULL)
        return -1;
    CURL *e = j->easy;
    curl_easy_setopt(e, CURLOPT_URL, w->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, j->body); /* not copied: j keeps it */
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, j->hdrs);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(w->timeout_ms < 5000 ? w->timeout_ms : 5000));
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_PRIVATE, j);
    if (curl_multi_add_handle(w->multi, e) != CURLM_OK)
        return -1;
    j->attempts++;
    w->inflight++;
    j->prev = NULL;
    j->next = w->fly;
    if (w->fly)
        w->fly->prev = j;
    w->fly = j;
    pthread_mutex_lock(&w->mu);
    w->st.attempts++;
    if (j->attempts > 1)
        w->st.retries++;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static void retry_insert(struct sim_webhook *w, struct job *j)
{
    struct job *after = w->retry_tail;
    while (after != NULL && after->due_ms > j->due_ms)
        after = after->prev;
    j->prev = after;
    j->next = after ? after->next : w->retry_head;
    if (j->next)
        j->next->prev = j;
    else
        w->retry_tail = j;
    if (after)
        after->next = j;
    else
        w->retry_head = j;
}

/* A failed attempt: retry later, or give up. Takes j. */
static void failed(struct sim_webhook *w, struct job *j, const char *why, long code)
{
    log_debug("upstream webhook attempt failed", "attempt=%d status=%ld error=\"%s\"",
              j->attempts, code, why);
    bump(w, &w->st.failed, 0);
    if (j->attempts > w->retries) {
        log_info("upstream webhook dropped after last retry", "attempts=%d", j->attempts);
        bump(w, &w->st.gave_up, -1);
        job_free(j);
        return;
    }
    int shift = j->attempts - 1 < 16 ? j->attempts - 1 : 16;
    int64_t backoff = 1000LL << shift;
    j->due_ms = mono_ms() + (backoff < BACKOFF_MAX_MS ? backoff : BACKOFF_MAX_MS);
    retry_insert(w, j);
}

static void reap(struct sim_webhook *w)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(w->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct job *j = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&j);
        CURLcode res = msg->data.result;
        long code = 0;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
        curl_multi_remove_handle(w->multi, msg->easy_handle);
        w->inflight--;
        if (j->prev)
            j->prev->next = j->next;
        else
            w->fly = j->next;
        if (j->next)
            j->next->prev = j->prev;
        j->next = j->prev = NULL;
        if (res == CURLE_OK && code >= 200 && code < 300) {
            bump(w, &w->st.delivered, -1);
            job_free(j);
        } else {
            failed(w, j, res != CURLE_OK ? curl_easy_strerror(res) : "non-2xx answer", code);
        }
    }
}

static void *worker(void *arg)
{
    struct sim_webhook *w = arg;
    log_thread_name("sim-webhook");
    while (!atomic_load(&w->stop)) {
        pthread_mutex_lock(&w->mu);
        if (w->in_head != NULL) {
            if (w->fresh_tail)
                w->fresh_tail->next = w->in_head;
            else
                w->fresh_head = w->in_head;
            w->fresh_tail = w->in_tail;
            w->in_head = w->in_tail = NULL;
            w->in_count = 0;
        }
        pthread_mutex_unlock(&w->mu);

        int64_t now = mono_ms();
        while (w->inflight < MAX_INFLIGHT) {
            struct job *j;
            if (w->retry_head != NULL && w->retry_head->due_ms <= now) {
                j = w->retry_head;
                w->retry_head = j->next;
                if (w->retry_head)
                    w->retry_head->prev = NULL;
                else
                    w->retry_tail = NULL;
            } else if (w->fresh_head != NULL) {
                j = w->fresh_head;
                w->fresh_head = j->next;
                if (w->fresh_head == NULL)
                    w->fresh_tail = NULL;
            } else {
                break;
            }
            j->next = j->prev = NULL;
            if (start(w, j) != 0)
                failed(w, j, "could not start the request", 0);
        }
        int running = 0;
        curl_multi_perform(w->multi, &running);
        reap(w);
        int timeout = 1000;
        if (w->inflight < MAX_INFLIGHT && w->retry_head != NULL) {
            int64_t d = w->retry_head->due_ms - mono_ms();
            timeout = d < 0 ? 0 : d < timeout ? (int)d : timeout;
        }
        if (w->inflight < MAX_INFLIGHT && w->fresh_head != NULL)
            timeout = 0;
        curl_multi_poll(w->multi, NULL, 0, timeout, NULL);
    }
    return NULL;
}

struct sim_webhook *sim_webhook_new(const char *url, const char *key, int64_t retries,
                                    int64_t timeout_ms)
{
    struct sim_webhook *w = xcalloc(1, sizeof(*w));
    w->url = xstrdup(url);
    w->retries = retries;
    w->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
    pthread_mutex_init(&w->mu, NULL);
    w->hmac = proto_hmac_new((const unsigned char *)key, strlen(key));
    w->multi = curl_multi_init();
    if (w->hmac == NULL || w->multi == NULL) {
        log_err("cannot set up upstream webhooks", "%s", "");
        goto fail;
    }
    curl_multi_setopt(w->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)MAX_INFLIGHT);
    /* The worker must not take SIGINT/SIGTERM: the lws thread handles them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&w->th, NULL, worker, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        log_err("cannot start the webhook thread", "errno=%d", rc);
        goto fail;
    }
    return w;
fail:
    if (w->multi)
        curl_multi_cleanup(w->multi);
    proto_hmac_free(w->hmac);
    pthread_mutex_destroy(&w->mu);
    free(w->url);
    free(w);
    return NULL;
}

void sim_webhook_post(struct sim_webhook *w, char *body, size_t len)
{
    pthread_mutex_lock(&w->mu);
    w->st.queued++;
    if (w->in_count >= MAX_QUEUED || w->st.pending >= MAX_QUEUED) {
        w->st.dropped++;
        pthread_mutex_unlock(&w->mu);
        free(body);
        return;
    }
    struct job *j = xcalloc(1, sizeof(*j));
    j->body = body;
    j->len = len;
    if (w->in_tail)
        w->in_tail->next = j;
    else
        w->in_head = j;
    w->in_tail = j;
    w->in_count++;
    w->st.pending++;
    pthread_mutex_unlock(&w->mu);
    curl_multi_wakeup(w->multi);
}

void sim_webhook_stats(struct sim_webhook *w, struct sim_webhook_stats *out)
{
    pthread_mutex_lock(&w->mu);
    *out = w->st;
    pthread_mutex_unlock(&w->mu);
}

void sim_webhook_reset_stats(struct sim_webhook *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t pending = w->st.pending;
    memset(&w->st, 0, sizeof(w->st));
    w->st.pending = pending;
    pthread_mutex_unlock(&w->mu);
}

static void free_list(struct job *j)
{
    for (struct job *n; j != NULL; j = n) {
        n = j->next;
        job_free(j);
    }
}

void sim_webhook_free(struct sim_webhook *w)
{
    if (w == NULL)
        return;
    atomic_store(&w->stop, 1);
    curl_multi_wakeup(w->multi);
    pthread_join(w->th, NULL);
    /* Abandon attempts in flight: every easy handle still attached belongs to a job. */
    for (struct job *j = w->fly, *n; j != NULL; j = n) {
        n = j->next;
        curl_multi_remove_handle(w->multi, j->easy);
        job_free(j);
    }
    free_list(w->fresh_head);
    free_list(w->retry_head);
    free_list(w->in_head);
    curl_multi_cleanup(w->multi);
    proto_hmac_free(w->hmac);
    pthread_mutex_destroy(&w->mu);
    free(w->url);
    free(w);
}

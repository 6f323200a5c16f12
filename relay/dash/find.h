/* find.h - the dashboard's reads of the request store for one session: a search ("find", the
 * q of GET /v1/requests, docs/search.md) answered with a summary row per request found, and
 * one request's facts ("facts", DESIGN "Request facts") as GET /v1/requests/{id} serves them.
 * The live page has no REST access (/v1 is on the REST port, behind the admin token), so it
 * asks here. The reads are store/search.h's and store/requests.h's; the upstream term
 * fallback and the facts' JSON are relay/api/search.h's (shared with the REST API, and so is
 * the anonymous miss rate).
 * runs on: core thread. */
#ifndef RELAY_DASH_FIND_H
#define RELAY_DASH_FIND_H

#include "relay/dash/internal.h"

/* Answer a find of x for term q (validated by protocol/dash_msg.c, allowed by the caller):
 * {"type":"find","status":"success","data":{"q","requests":[row, ...],"more","limit"}} with at
 * most HUB_FIND_MAX rows (HUB_FIND_ANON_MAX for !trusted), oldest created first; a term the
 * relay does not know is looked up once upstream (with an API key; for !trusted within the
 * address's miss rate, else a "rate_limited" error frame). A row: {"requestId","status",
 * "originChainId","destinationChainId","updatedAt","createdAt","user","recipient"}. */
void dash_find(struct hub *h, struct hsess *x, const char *q, int trusted);
/* Answer a facts request of x for request id: {"type":"facts","status":"success","data":
 * {"filters":{"id"}, the row's fields, "request": the facts or null}}, or a "not_found" error
 * frame for an id the relay does not know. */
void dash_facts(struct hub *h, struct hsess *x, const char *id);

#endif

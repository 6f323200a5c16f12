/* cors.h - cross-origin (CORS) decisions from an origins setting: which Origin a response may
 * name in Access-Control-Allow-Origin, and which preflight request headers may be echoed back.
 * Pure string work (no I/O), shared by the REST server (core thread) and the dashboard port (ws
 * thread). A setting is "*" (any origin), a comma-separated list of exact origins
 * ("https://app.example, http://localhost:3000"), or empty / unset (no cross-origin access).
 * runs on: any thread. */
#ifndef RELAY_CORS_H
#define RELAY_CORS_H

#include <stddef.h>

/* Most bytes of Access-Control-Request-Headers echoed back in a preflight answer. */
#define CORS_HEADERS_MAX 512

/* The value for Access-Control-Allow-Origin when a request comes from origin (the Origin
 * header, may be NULL) under the setting list (may be NULL): "*" when the list holds "*",
 * origin itself when it is listed (exact, ASCII case-insensitive), NULL when refused or when
 * there is no origin. The result is borrowed from list's static "*" or from origin. */
const char *cors_allow_origin(const char *list, const char *origin);

/* NULL when list is a valid origins setting (NULL, "", "*", or origins of the form
 * scheme://host[:port] separated by commas, optional spaces around them), else a static
 * sentence saying what is wrong (for a start-up error line). */
const char *cors_list_check(const char *list);

/* Nonzero when s (an Access-Control-Request-Headers value) may be echoed back verbatim: at
 * most CORS_HEADERS_MAX bytes of HTTP token characters, commas and spaces. */
int cors_headers_ok(const char *s);

#endif

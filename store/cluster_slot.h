/* cluster_slot.h - the pure half of Redis Cluster routing: key slots (CRC16-XMODEM with the
 * hash-tag rule of the Redis Cluster spec), which argument of a command is its routing key,
 * the slot map read from a CLUSTER SLOTS reply, the redis-cluster:// URL, and turning a
 * hiredis-formatted command back into argv (so a command can be resent on another node).
 * No I/O, no clock, no logging: every function is table-tested (tests/unit/
 * test_relay_store_slot.c). runs on: any thread (no shared state). */
#ifndef STORE_CLUSTER_SLOT_H
#define STORE_CLUSTER_SLOT_H

struct redisReply; /* hiredis' reply (cluster_map_parse reads one) */
#include <stddef.h>
#include <stdint.h>

#define CLUSTER_SLOTS 16384
#define CLUSTER_MAX_NODES 64 /* masters in a map plus seeds; more is refused */
#define CLUSTER_NO_NODE 0xFFFF

/* CRC16-CCITT (XMODEM): poly 0x1021, init 0. crc16("123456789") == 0x31C3. */
uint16_t cluster_crc16(const char *buf, size_t len);
/* Slot of a key: the hash tag's content when the key holds a non-empty "{...}" (first '{'
 * and the first '}' after it), else the whole key; modulo 16384. */
unsigned cluster_key_slot(const char *key, size_t len);

/* The routing key of a command (argv[0] is the command name, any case): EVAL/EVALSHA (and
 * _RO, FCALL) -> the first key, or none with numkeys 0; XREAD/XREADGROUP -> the first key
 * after STREAMS; XINFO/XGROUP/OBJECT -> argv[2]; commands without keys (PING, INFO, CLUSTER,
 * CONFIG, SCRIPT, AUTH, ASKING, ...) -> none; everything else -> argv[1]. Returns the key
 * (pointing into argv) and sets *klen, or NULL for "any node". Every call of the store goes
 * through this one entry point, so a new command shape is routed by adding a row here. */
const char *cluster_cmd_key(int argc, const char *const *argv, const size_t *lens,
                            size_t *klen);

/* One master of a slot map. */
struct cluster_addr {
    char host[256];
    int port;
};

/* Slot map: owner[slot] indexes masters[] or is CLUSTER_NO_NODE. */
struct cluster_map {
    int nmasters;
    struct cluster_addr masters[CLUSTER_MAX_NODES];
    uint16_t owner[CLUSTER_SLOTS];
};

/* Fill *m from a CLUSTER SLOTS reply ([[start, end, [host, port, id...], replicas...]...]).
 * An empty host means "the node that answered" (asked_host). Returns the number of slots
 * covered (0..16384) or -1 when the reply is malformed (m then undefined). */
int cluster_map_parse(struct cluster_map *m, const struct redisReply *r, const char *asked_host);

/* Parse a MOVED/ASK error text "MOVED 3999 127.0.0.1:6381". Returns 1 for MOVED, 2 for ASK,
 * 0 for any other error; sets slot and addr on 1/2. */
int cluster_redirect_parse(const char *err, size_t len, unsigned *slot,
                           struct cluster_addr *addr);

/* redis-cluster://[[user]:password@]host:port[,host:port...][/[0]]: seeds, optional user and
 * password (malloc'd; caller frees; decoded as redis_url_parse does, %40 for '@'). Returns 0, or -1 with *why set to a static reason
 * (e.g. "db must be 0 in Redis Cluster"). */
struct cluster_url {
    int nseeds;
    struct cluster_addr seeds[16];
    char *user, *password;
};
int cluster_url_parse(struct cluster_url *u, const char *url, const char **why);
void cluster_url_cleanup(struct cluster_url *u);

/* Split a RESP multi-bulk request (as redisvFormatCommand writes it) into argv: *argv and
 * *lens are malloc'd arrays of malloc'd, NUL-terminated copies (caller frees each and both).
 * Returns argc, or -1 on a malformed buffer (nothing allocated). */
int cluster_resp_split(const char *buf, size_t len, char ***argv, size_t **lens);

#endif

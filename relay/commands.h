/* commands.h - entry points of the subcommands dispatched by main.c.
 * Each takes the arguments after the subcommand name and returns the process exit status:
 * 0 ok, 1 runtime failure, 2 bad usage or settings, 3 not found (operator commands),
 * 4 not yet implemented.
 * runs on: main thread. */
#ifndef RELAY_COMMANDS_H
#define RELAY_COMMANDS_H

int serve_main(int argc, char **argv); /* relay/serve.c */
int sim_main(int argc, char **argv);   /* relay/sim/sim.c */
/* operator commands (track, untrack, status, requests, events, webhooks, deliveries, replay,
 * tail): relay/cli/ (cli.c holds the command table) */
int cli_main(const char *cmd, int argc, char **argv);

#define EXIT_USAGE 2
#define EXIT_NOTFOUND 3
#define EXIT_NOTYET 4

#endif

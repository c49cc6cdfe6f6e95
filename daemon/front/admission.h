/*
 * admission.h - who may open a session and read the stats: the daemon's
 * own uid, root, and members of allow_group. Membership counts the peer's
 * primary group and its supplementary groups (what `usermod -aG` adds), as
 * the kernel holds them for the connecting process (/proc/PID/status, its
 * uid checked, so a reused pid is not trusted), else as the user database
 * lists them for its uid.
 */
#ifndef TILEOPSD_ADMISSION_H
#define TILEOPSD_ADMISSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ADMISSION_MAX_GROUPS 64

/* A connecting process, by the credentials the kernel reported (-1: unknown). */
typedef struct peer {
	int64_t uid, gid, pid;
	int n_groups; /* supplementary groups, the primary one included */
	int64_t groups[ADMISSION_MAX_GROUPS];
} peer;

/* Fill p from the socket's credentials, with the process's groups. */
void admission_peer(peer *p, int64_t uid, int64_t gid, int64_t pid);
/* 1 when p's primary or supplementary groups include gid. */
int admission_in_group(const peer *p, int64_t gid);
/*
 * 1 when p may connect to a daemon running as daemon_uid with allow_group
 * allow_gid ((gid_t)-1: none); else 0, and `why` names the rule.
 */
int admission_allowed(const peer *p, uid_t daemon_uid, gid_t allow_gid, char *why, size_t len);

#endif

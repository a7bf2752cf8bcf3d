/*
 * vrmhelperfixture.h: FAKE test scaffolding for virt-rdmad (issue 5, 34)
 *
 * Nothing here is shipped or used by the daemon: it is what the unit tests
 * (vrmhelperdtest) and the load generator (tests/bench/vrmhelperscale.c)
 * share to play a host around one real virt-rdmad:
 *
 *   Helper          a real virt-rdmad process ($VRM_HELPERD_PATH) in its own
 *                   directory, with its own configuration and cluster key, a
 *                   fake sysfs (VRM_SYSFS_ROOT), the FAKE engine
 *                   ($VRM_FAKE_ENGINE_PATH, tests/helper/vrmfakeengine.c) in
 *                   the mode of Helper.mode, and libvirt's test:///default
 *   vrmFakeSource   a FAKE source helper: a vrmPeerServer on 127.0.0.1 on
 *                   the helpers' real TLS channel, served by the caller's
 *                   main loop, that answers every migration request (one
 *                   connection, one request; any number of them)
 *   hookSpawn/runHook
 *                   the hook ($VRM_HOOK_PATH) as libvirt runs it
 *
 * Failures of the scaffolding itself end the program (g_assert/g_error):
 * this is test code.
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include "vrmhelperclient.h"
#include "vrmhelperpeer.h"

typedef struct {
    char *dir;
    char *sock;
    char *conf;
    char *state;
    char *run;
    char *log;                      /* fake engine argv log */
    char *tokens;                   /* VRM_HELPER_TEST_TOKEN_DIR */
    GPid pid;
    char *mode;                     /* VRM_FAKE_ENGINE */
    unsigned int peerPort;
    const char *fallback;           /* [migration] fallback; NULL: the default (tcp) */
    char *metricsDir;               /* [metrics] textfile-dir; NULL: off (never
                                     * the host's node-exporter directory) */
    bool quiet;                     /* started without --debug */
    unsigned long long memlockMax;  /* the daemon's RLIMIT_MEMLOCK (soft and
                                     * hard, CAP_SYS_RESOURCE dropped): it may
                                     * not raise an engine's above; 0: as
                                     * inherited */
} Helper;

/* $NAME, which the test's meson environment must set */
const char *testEnv(const char *name);
/* A TCP port of 127.0.0.1 free right now */
unsigned int freePort(void);
/* @dir/@name, a cluster key made there if it is not yet */
char *testKey(const char *dir, const char *name);
/* waitpid() with a deadline, serving the default main context meanwhile;
 * past it the process is killed and the program ends */
int waitPid(GPid pid, int seconds);
/* Everything read from @fd until its end; closes it */
char *readAll(int fd);

void helperWriteConfig(Helper *h, const char *key, const char *extra);
Helper *helperNewFallback(const char *key, const char *extraConf, const char *fallback);
Helper *helperNew(const char *key, const char *extraConf);
char **helperEnv(Helper *h);
void helperStart(Helper *h);
void helperStop(Helper *h);
void helperKillEngines(Helper *h);
void helperFree(Helper *h);
/* One request on the control socket; the reply, or the program ends */
vrmControlMessage *helperCall(Helper *h, vrmControlMessage *req);


/* ---- the FAKE source peer: this program, on the real TLS channel ---- */

typedef enum {
    FAKE_SOURCE_OFFER,              /* offer, then result ok */
    FAKE_SOURCE_REFUSE,             /* result error at once */
    FAKE_SOURCE_SILENT,             /* never answers the request */
    FAKE_SOURCE_OUT_OF_TURN,        /* a result ok where the offer belongs */
} vrmFakeSourceMode;

typedef struct {
    vrmFakeSourceMode mode;
    vrmPeerCreds *creds;
    vrmPeerServer *srv;
    GPtrArray *conns;
    unsigned int port;
    char *socketPath;               /* what the offer names; NULL: the domain's
                                     * per-domain path under runDir */
    char *runDir;
    vrmPeerMessage *request;        /* the last thing the destination asked */
    vrmAnswer *answer;              /* what it answered last */
    vrmToken token;
    unsigned int requests;          /* requests heard */
    unsigned int accepted;          /* answers "accepted", confirmed */
    unsigned int refused;           /* other answers */
    int resultCode;                 /* the destination's last error result */
    char *resultError;              /* ... and its message; NULL: none */
} vrmFakeSource;

/* A source that offers @socketPath, whatever the domain */
vrmFakeSource *vrmFakeSourceNew(const char *key, vrmFakeSourceMode mode,
                                const char *socketPath);
/* A source of many domains: it offers each one's per-domain path under
 * @h's run directory, as a source sharing its [paths] run-dir does */
vrmFakeSource *vrmFakeSourceNewFor(Helper *h, const char *key,
                                   vrmFakeSourceMode mode);
void vrmFakeSourceFree(vrmFakeSource *fs);


/* ---- the hook, as libvirt runs it ---- */

typedef struct {
    int status;
    char *out;
    char *err;
} HookResult;

void hookResultClear(HookResult *r);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(HookResult, hookResultClear);

/* The hook started for `<op> begin` (NULL: migrate) with the configuration
 * @conf and @xml written to its standard input, which is closed; its
 * standard output and error in @out and @err */
GPid hookSpawn(const char *conf, const char *xml, const char *op, int *out, int *err);
/* ... and waited for, while the default main context serves */
void runHookWith(const char *conf, const char *xml, const char *op, HookResult *res);
void runHook(Helper *h, const char *xml, HookResult *res);

/* A domain XML of an RDMA-enabled domain; @port 0: no locator */
char *domainXML(const char *uuid, unsigned int port, const char *extra);
/* Where the destination QEMU of @uuid listens under @h */
char *domainPath(Helper *h, const char *uuid);

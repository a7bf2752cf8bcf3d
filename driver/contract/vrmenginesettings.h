/*
 * vrmenginesettings.h: the options of virt-rdma-engine, one table
 *
 * The contract between whoever starts an engine (virt-rdmad, `virt-rdma
 * bench`, the tests) and the engine itself. One row per option: its name,
 * its type and range, its default, which roles take it and its help text.
 * The same table encodes a vrmEngineSettings into an argument vector and
 * decodes it back in the engine, so the two sides cannot drift apart.
 * docs/man/virt-rdma-engine.rst describes every row.
 *
 * Secrets never travel in argv: the token comes through a pipe
 * (--token-fd), read once, wiped and closed by vrmEngineTokenRead().
 *
 * Public API summary
 * ------------------
 *   vrmEngineSettingsInit(&s) / Clear(&s)    defaults / free the strings
 *   vrmEngineSettingsDecode(argc, argv, &s)  strict: unknown, repeated or
 *                                            wrong-role options are errors
 *   vrmEngineSettingsEncode(&s, program)     NULL-terminated argv (GStrv)
 *   vrmEngineSettingsValidate(&s)            whole-settings checks by role
 *   vrmEngineSettingsPinnedBytes(&s)         the job's worst case
 *   vrmEngineSettingsHelp()                  --help text from the table
 *   vrmEngineTokenPipe(&token)               read end of a pipe holding it
 *   vrmEngineTokenRead(fd, &token)           read, wipe, close
 *   vrmEngineOptionGet(i)                    row i (tests, docs)
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

#include "vrmcapability.h"
#include "vrmenum.h"
#include "vrmlimits.h"
#include "vrmtoken.h"

/* Defaults that live nowhere else */
#define VRM_ENGINE_DEADLINE_CONNECT_DEFAULT 30      /* seconds */
#define VRM_ENGINE_IDLE_TIMEOUT_DEFAULT 120         /* seconds, 0: never */
#define VRM_ENGINE_DEADLINE_MAX 3600                /* seconds */

/* File descriptors a launcher maps into the engine (any number works;
 * these are what virt-rdmad and the bench use) */
#define VRM_ENGINE_FD_TOKEN 3
#define VRM_ENGINE_FD_STATS 4
#define VRM_ENGINE_FD_QEMU_LISTEN 5
#define VRM_ENGINE_FD_DISK_LISTEN 6
#define VRM_ENGINE_FD_TCP_LISTEN 8

typedef enum {
    VRM_ENGINE_ROLE_SOURCE,         /* listens for QEMU and for the peer */
    VRM_ENGINE_ROLE_DESTINATION,    /* connects to the peer and to QEMU */

    VRM_ENGINE_ROLE_LAST
} vrmEngineRole;
VRM_ENUM_DECL(vrmEngineRole);

/* Test hooks (tests only; documented in virt-rdma-engine(8)) */
typedef enum {
    VRM_ENGINE_FAULT_NONE,
    VRM_ENGINE_FAULT_VERSION,       /* destination: connect speaking version 1 */
    VRM_ENGINE_FAULT_MALFORMED,     /* send a malformed control message */
    VRM_ENGINE_FAULT_KILL,          /* SIGKILL itself after BYTES */
    VRM_ENGINE_FAULT_IMPOSTOR,      /* source: answer without the token */
    VRM_ENGINE_FAULT_BAD_AUTH,      /* destination: send a wrong AUTH */
    VRM_ENGINE_FAULT_EARLY_REGISTER, /* send REGISTER_REQUEST before the ring */
    VRM_ENGINE_FAULT_OVERSIZE,      /* send a control message > 4096 bytes */
    VRM_ENGINE_FAULT_FAIL,          /* source: fail right after listening */
    VRM_ENGINE_FAULT_VANISH,        /* destination: drop the connect request at once */
    VRM_ENGINE_FAULT_STALE_REQUEST, /* source: the first request's sender is gone */
    VRM_ENGINE_FAULT_WHOLE_WRITES,  /* a chunk in one work request even on Soft-RoCE */

    VRM_ENGINE_FAULT_LAST
} vrmEngineFault;
VRM_ENUM_DECL(vrmEngineFault);

typedef struct {
    vrmEngineRole role;
    char *domainUUID;               /* NULL: no cmdline check of QEMU */
    int qemuListenFd;               /* source: inherited listener, -1 none */
    char *qemuPath;                 /* destination: connect; source: bind */
    gint64 qemuUid;                 /* expected QEMU uid, -1: our own */
    gint64 qemuPid;                 /* source: expected QEMU pid, -1: any */
    char *address;                  /* rdma_cm: source listens, destination connects */
    unsigned int port;              /* source: 0 = chosen by the kernel */
    unsigned int channels;          /* maximum; QEMU may open fewer */
    unsigned int diskChannels;      /* most NBD connections, 0: no disks */
    int diskListenFd;               /* source: inherited NBD listener, -1 none */
    char *diskPath;                 /* destination: QEMU's NBD server; source: bind */
    int tcpListenFd;                /* source: QEMU's steered TCP connections
                                     * (transparent mode), -1 none */
    unsigned int tcpPortMin;        /* destination: QEMU's TCP ports it may
                                     * connect to, 0: takes no TCP */
    unsigned int tcpPortMax;
    unsigned int chunkSize;
    unsigned int ringDepth;
    guint32 caps;                   /* util/vrmcapability.h bits asked of the
                                     * peer (pin-all, write-imm): one switch
                                     * each, --NAME or --no-NAME */
    unsigned long long maxPinned;   /* 0: no allowance of our own */
    char *device;                   /* NULL: the device of the address */
    int tokenFd;                    /* -1: none (an error at validation) */
    char *statsSocket;              /* NULL: none */
    int statsFd;                    /* final record, -1: standard output */
    unsigned int deadlineConnect;   /* seconds */
    unsigned int idleTimeout;       /* seconds, 0: never */
    unsigned int waitStream;        /* seconds for QEMU's stream to begin,
                                     * 0: the idle timeout's */
    bool verbose;
    bool debug;
    vrmEngineFault fault;
    unsigned long long faultBytes;
} vrmEngineSettings;

typedef enum {
    VRM_ENGINE_OPT_BOOL,            /* a flag, no value */
    VRM_ENGINE_OPT_CAP,             /* a flag that switches the row's capability
                                     * from its default: --NAME for one off by
                                     * default, --no-NAME for one on */
    VRM_ENGINE_OPT_UINT,            /* unsigned int in [min, max] */
    VRM_ENGINE_OPT_SIZE,            /* util/vrmparse.h size in [min, max] */
    VRM_ENGINE_OPT_ID,              /* uid or pid (gint64, 0 .. max) */
    VRM_ENGINE_OPT_FD,              /* a file descriptor number */
    VRM_ENGINE_OPT_STRING,          /* checked by the row's validator */
    VRM_ENGINE_OPT_ADDRESS,         /* ADDR, ADDR:PORT or [ADDR]:PORT */
    VRM_ENGINE_OPT_ROLE,
    VRM_ENGINE_OPT_FAULT,           /* NAME or NAME:BYTES */

    VRM_ENGINE_OPT_LAST
} vrmEngineOptionType;

/* Which roles take an option */
#define VRM_ENGINE_FOR_SOURCE (1u << VRM_ENGINE_ROLE_SOURCE)
#define VRM_ENGINE_FOR_DESTINATION (1u << VRM_ENGINE_ROLE_DESTINATION)
#define VRM_ENGINE_FOR_BOTH (VRM_ENGINE_FOR_SOURCE | VRM_ENGINE_FOR_DESTINATION)

typedef struct {
    const char *name;               /* without the leading "--" */
    vrmEngineOptionType type;
    size_t offset;                  /* of the field in vrmEngineSettings */
    unsigned int roles;             /* VRM_ENGINE_FOR_* */
    unsigned long long min;         /* UINT, SIZE, ID, FD */
    unsigned long long max;
    bool powerOfTwo;                /* SIZE */
    bool (*valid)(const char *value);   /* STRING */
    const char *metavar;            /* NULL for flags */
    const char *help;               /* N_() */
    vrmCapability cap;              /* CAP */
} vrmEngineOption;

void vrmEngineSettingsInit(vrmEngineSettings *s);
void vrmEngineSettingsClear(vrmEngineSettings *s);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(vrmEngineSettings, vrmEngineSettingsClear);
void vrmEngineSettingsCopy(vrmEngineSettings *dst, const vrmEngineSettings *src);

int vrmEngineSettingsDecode(int argc, char **argv, vrmEngineSettings *s);
char **vrmEngineSettingsEncode(const vrmEngineSettings *s, const char *program);
int vrmEngineSettingsValidate(const vrmEngineSettings *s);
unsigned long long vrmEngineSettingsPinnedBytes(const vrmEngineSettings *s);
char *vrmEngineSettingsHelp(void);
/* "ADDR:PORT" or "[ADDR]:PORT" for messages and argv */
char *vrmEngineFormatAddress(const char *address, unsigned int port);

size_t vrmEngineOptionCount(void);
const vrmEngineOption *vrmEngineOptionGet(size_t i);

int vrmEngineTokenPipe(const vrmToken *token);
int vrmEngineTokenRead(int fd, vrmToken *token);

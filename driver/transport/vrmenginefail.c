/*
 * vrmenginefail.c: how a job fails and how the main thread is woken, from
 * any thread: the first failure wins and is kept under the leaf lock;
 * warnings that a peer can trigger are rate limited
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4, SO_PEERCRED; in each of the engine's files, so
                      * that vrmenginepriv.h's system headers read the same */
#endif

#include "vrmenginepriv.h"

static void
vrmEngineWake(vrmEngine *e)
{
    guint64 one = 1;

    if (e->wakefd >= 0 && write(e->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        VRM_WARN("cannot wake the engine: %s", g_strerror(errno));
}

static void
vrmEngineFail(vrmEngine *e, int code, const char *reason)
{
    bool first = false;
    guint32 i;

    g_mutex_lock(&e->lock);
    if (!e->failed) {
        e->failed = true;
        e->failCode = code;
        e->failReason = g_strdup(reason);
        first = true;
    }
    g_mutex_unlock(&e->lock);
    if (!first)
        return;
    /* the program prints the reason once, at exit */
    VRM_INFO("the job is failing: %s", reason);
    for (i = 0; i < e->nslots; i++)
        vrmChannelStop(e->slots[i].ch, code, reason);
    vrmEngineWake(e);
}

/* Fail with this thread's last error */
void
vrmEngineFailLast(vrmEngine *e)
{
    int code = vrmGetLastErrorCode();

    vrmEngineFail(e, code ? code : VRM_ERR_INTERNAL, vrmGetLastErrorMessage());
}

bool
vrmEngineFailed(vrmEngine *e)
{
    bool failed;

    g_mutex_lock(&e->lock);
    failed = e->failed;
    g_mutex_unlock(&e->lock);
    return failed;
}

/* vrmChannelHost: what a channel's progress thread may do to the engine */
void
vrmEngineChannelFail(void *opaque, int code, const char *reason)
{
    vrmEngineFail(((vrmEngineSlot *)opaque)->engine, code, reason);
}

void
vrmEngineChannelWake(void *opaque)
{
    vrmEngineWake(((vrmEngineSlot *)opaque)->engine);
}

/* Warnings a peer can trigger (main thread): a few per window, then a
 * count of what was left out */
bool
vrmEngineMayWarn(vrmEngine *e)
{
    gint64 now = g_get_monotonic_time();

    if (now - e->logWindowUs > VRM_ENGINE_LOG_WINDOW_US) {
        if (e->logCount > VRM_ENGINE_LOG_BURST)
            VRM_WARN("%u more warnings like the above were not logged",
                     e->logCount - VRM_ENGINE_LOG_BURST);
        e->logWindowUs = now;
        e->logCount = 0;
    }
    return ++e->logCount <= VRM_ENGINE_LOG_BURST;
}

/* "ADDR:PORT" of the peer of @id */
char *
vrmEnginePeerName(struct rdma_cm_id *id)
{
    struct sockaddr *sa = id ? rdma_get_peer_addr(id) : NULL;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned int port = 0;

    if (sa && sa->sa_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)sa;

        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (sa && sa->sa_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
    }
    return vrmEngineFormatAddress(host, port);
}

/* Has process @pid ended, or is it ending? (a crash closes its sockets in
 * do_exit(), before it becomes a zombie: PF_EXITING is set by then) */
bool
vrmEngineProcessGone(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *stat = NULL;
    g_auto(GStrv) fields = NULL;
    const char *close_paren;
    guint64 flags;

    if (kill(pid, 0) < 0 && errno == ESRCH)
        return true;
    if (!g_file_get_contents(path, &stat, NULL, NULL))
        return true;
    /* "PID (COMM) STATE PPID ... FLAGS(9th)": COMM ends at the last ')' */
    if (!(close_paren = strrchr(stat, ')')) || close_paren[1] != ' ')
        return false;
    if (close_paren[2] == 'Z' || close_paren[2] == 'X')
        return true;
    fields = g_strsplit(close_paren + 2, " ", 8);
    if (g_strv_length(fields) < 8)
        return false;
    flags = g_ascii_strtoull(fields[6], NULL, 10);
    return flags & VRM_PF_EXITING;
}

/*
 * vrmenginecommand.c: starting a transport engine (vrmenginecommand.h)
 */
#include <config.h>

#include <unistd.h>

#include "vrmenginecommand.h"
#include "vrmerror.h"
#include "vrmi18n.h"

struct _vrmEngineCommand {
    GStrv argv;
    char *program;
    int tokenFd;                    /* ours: the token's pipe, -1 none */
    int srcFds[VRM_ENGINE_COMMAND_FDS_MAX];
    int dstFds[VRM_ENGINE_COMMAND_FDS_MAX];
    guint nfds;
    int stderrFd;                   /* -1: inherited */
    GSpawnChildSetupFunc setup;
    gpointer setupData;
};

vrmEngineCommand *
vrmEngineCommandNew(const vrmEngineSettings *settings, const char *program)
{
    vrmEngineCommand *cmd = g_new0(vrmEngineCommand, 1);

    cmd->argv = vrmEngineSettingsEncode(settings, program);
    cmd->program = g_strdup(program);
    cmd->tokenFd = -1;
    cmd->stderrFd = -1;
    return cmd;
}

void
vrmEngineCommandPassFd(vrmEngineCommand *cmd, int fd, int target)
{
    /* the launchers pass a fixed set: more is a programming error */
    g_assert(cmd->nfds < VRM_ENGINE_COMMAND_FDS_MAX);
    cmd->srcFds[cmd->nfds] = fd;
    cmd->dstFds[cmd->nfds++] = target;
}

int
vrmEngineCommandPassToken(vrmEngineCommand *cmd, const vrmToken *token)
{
    g_assert(cmd->tokenFd < 0);
    if ((cmd->tokenFd = vrmEngineTokenPipe(token)) < 0)
        return -1;
    vrmEngineCommandPassFd(cmd, cmd->tokenFd, VRM_ENGINE_FD_TOKEN);
    return 0;
}

void
vrmEngineCommandSetStderr(vrmEngineCommand *cmd, int fd)
{
    cmd->stderrFd = fd;
}

void
vrmEngineCommandSetChildSetup(vrmEngineCommand *cmd, GSpawnChildSetupFunc func,
                              gpointer data)
{
    cmd->setup = func;
    cmd->setupData = data;
}

int
vrmEngineCommandRun(vrmEngineCommand *cmd, GSpawnFlags flags, GPid *pid)
{
    g_autoptr(GError) err = NULL;
    int ret = 0;

    /* the child is reaped by the launcher's watch */
    flags |= G_SPAWN_DO_NOT_REAP_CHILD;
    if (!g_spawn_async_with_pipes_and_fds(NULL, (const char *const *)cmd->argv, NULL,
                                          flags, cmd->setup, cmd->setupData,
                                          -1, -1, cmd->stderrFd,
                                          cmd->srcFds, cmd->dstFds, cmd->nfds,
                                          pid, NULL, NULL, NULL, &err)) {
        vrmReportError(VRM_ERR_SYSTEM,
                       _("cannot start the transport engine %1$s: %2$s"),
                       cmd->program, err->message);
        ret = -1;
    }
    /* the engine holds its own copy now (or never will) */
    if (cmd->tokenFd >= 0) {
        close(cmd->tokenFd);
        cmd->tokenFd = -1;
    }
    return ret;
}

void
vrmEngineCommandFree(vrmEngineCommand *cmd)
{
    if (!cmd)
        return;
    if (cmd->tokenFd >= 0)
        close(cmd->tokenFd);
    g_strfreev(cmd->argv);
    g_free(cmd->program);
    g_free(cmd);
}

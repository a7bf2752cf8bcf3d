/*
 * vrmenginecommand.h: starting a transport engine, as libvirt's virCommand
 * starts its helpers
 *
 * Both launchers, virt-rdmad's jobs and `virt-rdma bench`, start the same
 * thing: the argv from the options table, the job's token through a pipe
 * (never argv or the environment), the descriptors the settings name
 * mapped to their numbers (VRM_ENGINE_FD_*), standard error where the
 * launcher wants it. A command collects that and spawns once. It owns the
 * token's pipe; the descriptors it is given stay the caller's.
 *
 * Public API summary
 * ------------------
 *   cmd = vrmEngineCommandNew(&settings, program)
 *   vrmEngineCommandPassToken(cmd, &token)        -1 with the error reported
 *   vrmEngineCommandPassFd(cmd, fd, target)       target: VRM_ENGINE_FD_*
 *   vrmEngineCommandSetStderr(cmd, fd)            default: inherited
 *   vrmEngineCommandSetChildSetup(cmd, func, data)  runs in the child
 *   vrmEngineCommandRun(cmd, flags, &pid)         -1 with the error reported
 *   vrmEngineCommandFree(cmd)
 */
#pragma once

#include <glib.h>

#include "vrmenginesettings.h"

/* The most descriptors an engine is given: token, stats, QEMU's, the
 * disks', the transparent mode's listener and the set-up status pipe */
#define VRM_ENGINE_COMMAND_FDS_MAX 8

typedef struct _vrmEngineCommand vrmEngineCommand;

vrmEngineCommand *vrmEngineCommandNew(const vrmEngineSettings *settings,
                                      const char *program);
int vrmEngineCommandPassToken(vrmEngineCommand *cmd, const vrmToken *token);
void vrmEngineCommandPassFd(vrmEngineCommand *cmd, int fd, int target);
void vrmEngineCommandSetStderr(vrmEngineCommand *cmd, int fd);
void vrmEngineCommandSetChildSetup(vrmEngineCommand *cmd, GSpawnChildSetupFunc func,
                                   gpointer data);
int vrmEngineCommandRun(vrmEngineCommand *cmd, GSpawnFlags flags, GPid *pid);
void vrmEngineCommandFree(vrmEngineCommand *cmd);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmEngineCommand, vrmEngineCommandFree);

/*
 * vrmtransport.h: the channel tunnel, public side
 *
 * A vrmEngine is one job on one host: it joins QEMU's UNIX-socket
 * connections (main + multifd) on this host with the peer engine over one RC
 * QP per channel. vrmEngineRun() blocks until every channel has ended in
 * both directions (0) or the job failed (-1, error reported). Its settings
 * are the contract's (driver/contract/vrmenginesettings.h), its stats the
 * contract's record (vrmenginestats.h).
 */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "vrmenginesettings.h"
#include "vrmenginestats.h"
#include "vrmproto.h"

/* RLIMIT_MEMLOCK (unless CAP_IPC_LOCK) and the host's memory against the
 * job's worst case */
int vrmEngineCheckPinned(const vrmEngineSettings *s);

typedef struct _vrmEngine vrmEngine;

/* @token is copied; the caller wipes its own copy */
vrmEngine *vrmEngineNew(const vrmEngineSettings *settings, const vrmToken *token);
void vrmEngineFree(vrmEngine *engine);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmEngine, vrmEngineFree);

int vrmEngineRun(vrmEngine *engine);
/* The stats record of the job now (clear it with vrmEngineStatsClear) */
void vrmEngineGetStats(vrmEngine *engine, vrmEngineStats *st);

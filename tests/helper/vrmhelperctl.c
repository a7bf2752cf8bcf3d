/*
 * vrmhelperctl: a bare client of virt-rdmad for the tests
 *
 *   vrmhelperctl [--socket PATH] list
 *   vrmhelperctl [--socket PATH] query ID | cancel ID | query-domain NAME
 *   vrmhelperctl [--socket PATH] query-intent N | cancel-intent N
 *   vrmhelperctl [--socket PATH] prepare NAME UUID [CHANNELS]
 *   vrmhelperctl [--socket PATH] host-info
 *   vrmhelperctl [--socket PATH] raw < request.xml
 *       prints the reply document; exit 0 for an ok reply, 1 for an error
 *       reply (its message on stderr), 2 when there was no reply
 *   vrmhelperctl peer-request KEYFILE ADDRESS PORT NAME UUID [FROM [NAMED]]
 *       asks the helper at ADDRESS:PORT, on the helpers' TLS channel with
 *       the cluster key KEYFILE, for the migration of the domain, from the
 *       local address FROM (default 127.0.0.1, the kernel's choice), as
 *       the helper at NAMED (default FROM); prints
 *       "offer" (and withdraws) or "refused: MESSAGE" / "failed: MESSAGE";
 *       exit 0 for an offer, 1 otherwise
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrmhelperclient.h"
#include "vrmhelperpeer.h"
#include "vrmerror.h"
#include "vrmi18n.h"

typedef struct {
    GMainLoop *loop;
    const char *name;
    const char *uuid;
    const char *named;              /* the requester's address in the request */
    int rc;
    bool answered;                  /* one line: the channel's end after it is no news */
} vrmCtlPeer;

static void
ctlReady(vrmPeerConn *pc, gpointer opaque)
{
    vrmCtlPeer *p = opaque;
    g_autoptr(vrmPeerMessage) req = vrmPeerMessageNew(VRM_PEER_MIGRATION_REQUEST);

    req->domainName = g_strdup(p->name);
    req->domainUUID = g_strdup(p->uuid);
    req->requester = vrmLocatorNew("vrmhelperctl", p->named, 1);
    req->maxChannels = 1;
    vrmPeerConnSend(pc, req);
    vrmPeerConnExpect(pc, 30);
}

static void
ctlMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    vrmCtlPeer *p = opaque;
    g_autoptr(vrmPeerMessage) m = msg;

    p->answered = true;
    if (m->type == VRM_PEER_MIGRATION_OFFER) {
        g_autoptr(vrmPeerMessage) no = vrmPeerResultNewError(VRM_ERR_CANCELLED,
                                                             "vrmhelperctl only asked");

        printf("offer\n");
        vrmPeerConnSend(pc, no);
        p->rc = 0;
    } else if (m->type == VRM_PEER_MIGRATION_RESULT && m->errorCode != VRM_ERR_OK) {
        printf("refused: %s\n", m->errorMessage ? m->errorMessage : "");
    } else {
        printf("unexpected <%s>\n", vrmPeerTypeTypeToString(m->type));
    }
    g_main_loop_quit(p->loop);
}

static void
ctlFailed(vrmPeerConn *pc, gpointer opaque)
{
    vrmCtlPeer *p = opaque;

    if (!p->answered)
        printf("failed: %s\n", vrmGetLastErrorMessage());
    g_main_loop_quit(p->loop);
}

static int
ctlPeerRequest(int argc, char **argv)
{
    g_autoptr(vrmHelperConfig) conf = vrmHelperConfigNew();
    g_autoptr(vrmPeerCreds) creds = NULL;
    g_autoptr(vrmLocator) to = vrmLocatorNew("localhost", argv[1], atoi(argv[2]));
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
    vrmPeerConnCallbacks cb = { ctlReady, ctlMessage, ctlFailed };
    const char *from = argc > 5 ? argv[5] : NULL;
    vrmCtlPeer p = { loop, argv[3], argv[4], argc > 6 ? argv[6] : from ? from : "127.0.0.1",
                     1, false };
    vrmPeerConn *pc;

    g_free(conf->peerKeyFile);
    conf->peerKeyFile = g_strdup(argv[0]);
    conf->peerAuth = VRM_PEER_AUTH_PSK;
    if (vrmPeerCredsLoad(conf, &creds) < 0) {
        printf("failed: %s\n", vrmGetLastErrorMessage());
        return 1;
    }
    if (from)
        vrmPeerCredsSetSource(creds, from);
    if (!(pc = vrmPeerConnConnect(creds, to, 10, &cb, &p))) {
        printf("failed: %s\n", vrmGetLastErrorMessage());
        return 1;
    }
    g_main_loop_run(loop);
    vrmPeerConnFree(pc);
    return p.rc;
}

static vrmControlMessage *
ctlRequest(int argc, char **argv)
{
    const char *cmd = argv[1];
    vrmControlMessage *req = NULL;

    if (g_str_equal(cmd, "list")) {
        req = vrmControlMessageNew(VRM_CONTROL_JOB_LIST);
    } else if (g_str_equal(cmd, "host-info")) {
        req = vrmControlMessageNew(VRM_CONTROL_HOST_INFO);
    } else if ((g_str_equal(cmd, "query") || g_str_equal(cmd, "cancel")) && argc >= 3) {
        req = vrmControlMessageNew(g_str_equal(cmd, "query") ?
                                   VRM_CONTROL_JOB_QUERY : VRM_CONTROL_JOB_CANCEL);
        req->hasId = true;
        req->id = g_ascii_strtoull(argv[2], NULL, 10);
    } else if ((g_str_equal(cmd, "query-intent") || g_str_equal(cmd, "cancel-intent")) &&
               argc >= 3) {
        req = vrmControlMessageNew(g_str_equal(cmd, "query-intent") ?
                                   VRM_CONTROL_JOB_QUERY : VRM_CONTROL_JOB_CANCEL);
        req->hasIntent = true;
        req->intent = g_ascii_strtoull(argv[2], NULL, 10);
    } else if (g_str_equal(cmd, "query-domain") && argc >= 3) {
        req = vrmControlMessageNew(VRM_CONTROL_JOB_QUERY);
        req->domainName = g_strdup(argv[2]);
    } else if (g_str_equal(cmd, "prepare") && argc >= 4) {
        req = vrmControlMessageNew(VRM_CONTROL_JOB_PREPARE);
        req->domainName = g_strdup(argv[2]);
        req->domainUUID = g_strdup(argv[3]);
        if (argc >= 5) {
            req->overrides = g_new0(vrmMigrationParams, 1);
            req->overrides->channels = atoi(argv[4]);
        }
    } else if (g_str_equal(cmd, "raw")) {
        g_autoptr(GString) in = g_string_new(NULL);
        char buf[4096];
        size_t n;

        while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0)
            g_string_append_len(in, buf, n);
        if (!(req = vrmControlMessageParseString(in->str)))
            fprintf(stderr, "vrmhelperctl: %s\n", vrmGetLastErrorMessage());
    }
    return req;
}

int
main(int argc, char **argv)
{
    g_autoptr(vrmControlMessage) req = NULL;
    g_autoptr(vrmControlMessage) reply = NULL;
    g_autofree char *text = NULL;
    const char *sock = NULL;

    vrmI18nInit();
    if (argc >= 7 && g_str_equal(argv[1], "peer-request"))
        return ctlPeerRequest(argc - 2, argv + 2);
    if (argc >= 3 && g_str_equal(argv[1], "--socket")) {
        sock = argv[2];
        argv += 2;
        argc -= 2;
    }
    if (argc < 2 || !(req = ctlRequest(argc, argv))) {
        fprintf(stderr, "usage: vrmhelperctl [--socket PATH] list|host-info|query ID|cancel ID|query-intent N|cancel-intent N|query-domain NAME|prepare NAME UUID [CH]|raw\n"
                        "       vrmhelperctl peer-request KEYFILE ADDRESS PORT NAME UUID [FROM [NAMED]]\n");
        return 2;
    }
    if (!(reply = vrmHelperClientCall(sock, req, 60000))) {
        fprintf(stderr, "vrmhelperctl: %s\n", vrmGetLastErrorMessage());
        return 2;
    }
    text = vrmControlMessageFormat(reply);
    fputs(text, stdout);
    if (reply->status != VRM_REPLY_OK) {
        fprintf(stderr, "%s\n", reply->errorMessage);
        return 1;
    }
    return 0;
}

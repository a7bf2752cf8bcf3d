/*
 * vrmhelperevents.c: who may see a job, and the job events pushed to
 * subscribers (virt-rdma events)
 *
 * A subscriber sent <job-events/> on the control socket; the connection
 * stays open (vrmhelperconn.h, STREAMING) and every change of state of a
 * job it may see reaches it as <reply status="ok"><job .../></reply>.
 * vrmHelperJobsSave() is where every change of state passes, and calls
 * vrmHelperEventsJobChanged(). Records never carry a token.
 */
#include <config.h>

#include <unistd.h>

#include "vrmhelperdpriv.h"
#include "vrmerror.h"
#include "vrmi18n.h"

/* Subscribers of one user other than root at once; all together, half the
 * client slots (the rest stay for requests) */
#define VRM_HELPER_SUBSCRIBERS_PER_USER 4

bool
vrmHelperCredSees(const vrmHelperCred *cred, const vrmJobRecord *rec)
{
    if (cred->uid == 0 || cred->uid == geteuid())
        return true;
    return rec->hasOwner && rec->owner == cred->uid;
}

static unsigned int
vrmHelperSubscribersMax(vrmHelperDaemon *d)
{
    return MAX(1, d->conf->maxClients / 2);
}

void
vrmHelperEventsSubscribe(vrmHelperDaemon *d, vrmHelperConn *c)
{
    const vrmHelperCred *cred = vrmHelperConnCred(c);

    if (vrmHelperServerSubscribers(d->server, (uid_t)-1) >= vrmHelperSubscribersMax(d) ||
        (cred->uid != 0 &&
         vrmHelperServerSubscribers(d->server, cred->uid) >= VRM_HELPER_SUBSCRIBERS_PER_USER)) {
        vrmHelperConnReplyError(c, VRM_ERR_RESOURCE,
                                _("too many event subscribers on this host; end one (virt-rdma events) and try again"));
        return;
    }
    vrmHelperConnSubscribe(c);
}

typedef struct {
    const vrmJobRecord *rec;
    const char *xml;
} vrmHelperEvent;

static void
vrmHelperEventSend(vrmHelperConn *c, gpointer opaque)
{
    const vrmHelperEvent *ev = opaque;

    if (vrmHelperCredSees(vrmHelperConnCred(c), ev->rec))
        vrmHelperConnPush(c, ev->xml);
}

void
vrmHelperEventsJobChanged(vrmHelperDaemon *d, vrmHelperJob *job)
{
    g_autoptr(vrmControlMessage) msg = NULL;
    g_autofree char *xml = NULL;
    vrmHelperEvent ev = { job->record, NULL };

    if (!d->server || !vrmHelperServerSubscribers(d->server, (uid_t)-1))
        return;
    msg = vrmControlMessageNew(VRM_CONTROL_REPLY);
    msg->status = VRM_REPLY_OK;
    /* the record stays in the job table: borrowed */
    g_ptr_array_set_free_func(msg->jobs, NULL);
    g_ptr_array_add(msg->jobs, job->record);
    ev.xml = xml = vrmControlMessageFormat(msg);
    vrmHelperServerForEachSubscriber(d->server, vrmHelperEventSend, &ev);
}

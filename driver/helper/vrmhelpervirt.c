/*
 * vrmhelpervirt.c: virt-rdmad's own connection to libvirt
 *
 * Threads: the worker (owns the connection; every libvirt call of the
 * helper) and the main loop (results, and libvirt's events: libvirt's
 * default event implementation is GLib's default main context, which the
 * main loop runs). The two share only the task queue; the status for
 * host-info is under a mutex.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include <libxml/parser.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vrmhelpervirt.h"
#include "vrmdomainxml.h"
#include "vrmhelperratelimit.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

/* libvirt's state of QEMU domains (qemu:///system on Debian) */
#define VRM_LIBVIRT_QEMU_STATE_DIR "/run/libvirt/qemu"
/* How long the worker waits for work before it tries to reconnect */
#define VRM_VIRT_RETRY_MS 5000
/* VIR_MIGRATE_RDMA_PIN_ALL, as libvirt keeps it in the job's flags */
#define VRM_VIRT_FLAG_PIN_ALL ((unsigned long long)VIR_MIGRATE_RDMA_PIN_ALL)

typedef enum {
    VRM_VIRT_TASK_DOMAIN,       /* the facts of one domain */
    VRM_VIRT_TASK_OUTCOME,      /* how its outgoing migration ended */
    VRM_VIRT_TASK_LOCATOR,      /* the locator of one domain */
    VRM_VIRT_TASK_LOCATOR_ALL,  /* the locators of every running domain */
    VRM_VIRT_TASK_STOP,
} vrmVirtTaskType;

typedef struct {
    vrmVirtTaskType type;
    char *uuid;
    vrmDomainFactsFunc factsDone;
    vrmOutcomeFunc outcomeDone;
    gpointer opaque;
    /* results */
    vrmDomainFacts *facts;
    vrmOutcome outcome;
    char *detail;
} vrmVirtTask;

struct _vrmHelperVirt {
    char *uri;
    vrmLocator *locator;        /* ours; read by the worker only after New */
    bool tagAll;                /* [migration] rdma = all: every running
                                 * domain gets the locator, unless its
                                 * metadata says enabled="no" */
    GAsyncQueue *queue;         /* vrmVirtTask * */
    GThread *worker;
    GMainContext *context;      /* where results go: the creator's */
    virConnectPtr conn;         /* worker only */
    int callbacks[2];           /* event callback ids, -1 none */
    gint broken;                /* atomic: libvirt closed the connection */
    GMutex lock;                /* protects the two below */
    bool connected;
    char *error;                /* why not connected */
    vrmRateLimit log;
    vrmPostcopyFailedFunc postcopyFailed;   /* main loop only */
    gpointer postcopyFailedOpaque;
};

static void
vrmVirtTaskFree(vrmVirtTask *task)
{
    g_free(task->uuid);
    vrmDomainFactsFree(task->facts);
    g_free(task->detail);
    g_free(task);
}

void
vrmDomainFactsFree(vrmDomainFacts *facts)
{
    if (!facts)
        return;
    g_free(facts->uuid);
    g_free(facts->error);
    g_free(facts->name);
    vrmMigrationDefFree(facts->def);
    g_free(facts->defError);
    g_free(facts);
}

/* What the source job says once libvirt has answered: never "completed"
 * when libvirt could not be asked (the engine's end is not the
 * migration's) */
vrmJobState
vrmOutcomeJobState(vrmOutcome outcome)
{
    switch (outcome) {
    case VRM_OUTCOME_SUCCEEDED:
        return VRM_JOB_STATE_COMPLETED;
    case VRM_OUTCOME_FAILED:
        return VRM_JOB_STATE_FAILED;
    case VRM_OUTCOME_UNKNOWN:
        return VRM_JOB_STATE_UNKNOWN;
    case VRM_OUTCOME_PENDING:
        break;
    }
    return VRM_JOB_STATE_LAST;
}

vrmOutcome
vrmMigrationOutcome(bool found, int state, int reason, int jobType)
{
    if (!found)
        return VRM_OUTCOME_SUCCEEDED;
    if (state == VIR_DOMAIN_SHUTOFF && reason == VIR_DOMAIN_SHUTOFF_MIGRATED)
        return VRM_OUTCOME_SUCCEEDED;
    if (jobType != VIR_DOMAIN_JOB_NONE)
        return VRM_OUTCOME_PENDING;
    if (state == VIR_DOMAIN_PAUSED && reason == VIR_DOMAIN_PAUSED_MIGRATION)
        return VRM_OUTCOME_PENDING;
    /* after the switch to post-copy the guest cannot run here again: it
     * leaves (shut off, migrated) or stays paused for a recovery; libvirt
     * reports no job for a while after a resumed post-copy completed */
    if (state == VIR_DOMAIN_PAUSED &&
        (reason == VIR_DOMAIN_PAUSED_POSTCOPY || reason == VIR_DOMAIN_PAUSED_POSTCOPY_FAILED))
        return VRM_OUTCOME_PENDING;
    if (state == VIR_DOMAIN_RUNNING || state == VIR_DOMAIN_PAUSED ||
        state == VIR_DOMAIN_SHUTOFF || state == VIR_DOMAIN_CRASHED)
        return VRM_OUTCOME_FAILED;
    return VRM_OUTCOME_PENDING;
}


/* ---- libvirt's events ------------------------------------------------ */

/*
 * libvirt's default event implementation attaches its sources to GLib's
 * default main context: whoever runs that context dispatches libvirt's
 * events, here the helper's main loop. No thread of our own runs it: a
 * second thread iterating the same context would dispatch the helper's own
 * sources (clients, peers, timers) whenever the main loop is between
 * iterations.
 */
/* libvirt's errors reach the log through our own messages only, not
 * also on stderr as libvirt's default handler would print them */
static void
vrmVirtQuiet(void *opaque, virErrorPtr err)
{
}

static void
vrmVirtEventsStart(void)
{
    static gsize started;

    if (g_once_init_enter(&started)) {
        virSetErrorFunc(NULL, vrmVirtQuiet);
        virEventRegisterDefaultImpl();
        g_once_init_leave(&started, 1);
    }
}


/* ---- the worker -------------------------------------------------------- */

static void
vrmVirtSetStatus(vrmHelperVirt *v, bool connected, const char *error)
{
    g_mutex_lock(&v->lock);
    v->connected = connected;
    g_free(v->error);
    v->error = g_strdup(error);
    g_mutex_unlock(&v->lock);
}

/* A task for the worker; a query names the callback of its answer */
static void
vrmVirtPushTask(vrmHelperVirt *v, vrmVirtTaskType type, const char *uuid,
                vrmDomainFactsFunc factsDone, vrmOutcomeFunc outcomeDone,
                gpointer opaque)
{
    vrmVirtTask *task = g_new0(vrmVirtTask, 1);

    task->type = type;
    task->uuid = g_strdup(uuid);
    task->factsDone = factsDone;
    task->outcomeDone = outcomeDone;
    task->opaque = opaque;
    g_async_queue_push(v->queue, task);
}

static void
vrmVirtPush(vrmHelperVirt *v, vrmVirtTaskType type, const char *uuid)
{
    vrmVirtPushTask(v, type, uuid, NULL, NULL, NULL);
}

/* main loop (libvirt's event): a domain started or resumed */
static int
vrmVirtLifecycle(virConnectPtr conn, virDomainPtr dom, int event, int detail,
                 void *opaque)
{
    vrmHelperVirt *v = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];

    if ((event != VIR_DOMAIN_EVENT_STARTED && event != VIR_DOMAIN_EVENT_RESUMED) ||
        virDomainGetUUIDString(dom, uuid) != 0)
        return 0;
    /* the destination's side of a post-copy that broke: the guest runs
     * here, its missing pages wait for a recovery */
    if (event == VIR_DOMAIN_EVENT_RESUMED &&
        detail == VIR_DOMAIN_EVENT_RESUMED_POSTCOPY_FAILED) {
        if (v->postcopyFailed)
            v->postcopyFailed(uuid, v->postcopyFailedOpaque);
        return 0;
    }
    vrmVirtPush(v, VRM_VIRT_TASK_LOCATOR, uuid);
    return 0;
}

/* main loop (libvirt's event): a domain's metadata changed */
static void
vrmVirtMetadata(virConnectPtr conn, virDomainPtr dom, int type,
                const char *nsuri, void *opaque)
{
    char uuid[VIR_UUID_STRING_BUFLEN];

    if (type == VIR_DOMAIN_METADATA_ELEMENT &&
        g_strcmp0(nsuri, VRM_XML_NS_MIGRATION) == 0 &&
        virDomainGetUUIDString(dom, uuid) == 0)
        vrmVirtPush(opaque, VRM_VIRT_TASK_LOCATOR, uuid);
}

static void
vrmVirtClosed(virConnectPtr conn, int reason, void *opaque)
{
    vrmHelperVirt *v = opaque;

    g_atomic_int_set(&v->broken, 1);
    /* wake the worker up */
    vrmVirtPush(v, VRM_VIRT_TASK_LOCATOR_ALL, NULL);
}

static void
vrmVirtDisconnect(vrmHelperVirt *v)
{
    size_t i;

    if (!v->conn)
        return;
    for (i = 0; i < G_N_ELEMENTS(v->callbacks); i++) {
        if (v->callbacks[i] >= 0)
            virConnectDomainEventDeregisterAny(v->conn, v->callbacks[i]);
        v->callbacks[i] = -1;
    }
    virConnectUnregisterCloseCallback(v->conn, vrmVirtClosed);
    virConnectClose(v->conn);
    v->conn = NULL;
}

/* The connection, opened if needed; NULL with the status set */
static virConnectPtr
vrmVirtConnect(vrmHelperVirt *v, bool *fresh)
{
    *fresh = false;
    if (v->conn && (g_atomic_int_get(&v->broken) || virConnectIsAlive(v->conn) != 1))
        vrmVirtDisconnect(v);
    if (v->conn)
        return v->conn;
    g_atomic_int_set(&v->broken, 0);
    if (!(v->conn = virConnectOpen(v->uri))) {
        g_autofree char *msg =
            g_strdup_printf(_("cannot connect to libvirt at %1$s: %2$s"),
                            v->uri, virGetLastErrorMessage());

        VRM_WARN_LIMITED(&v->log, "%s", msg);
        vrmVirtSetStatus(v, false, msg);
        return NULL;
    }
    virConnectRegisterCloseCallback(v->conn, vrmVirtClosed, v, NULL);
    v->callbacks[0] = virConnectDomainEventRegisterAny(v->conn, NULL,
                                                       VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                       VIR_DOMAIN_EVENT_CALLBACK(vrmVirtLifecycle),
                                                       v, NULL);
    v->callbacks[1] = virConnectDomainEventRegisterAny(v->conn, NULL,
                                                       VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
                                                       VIR_DOMAIN_EVENT_CALLBACK(vrmVirtMetadata),
                                                       v, NULL);
    VRM_INFO("connected to libvirt at %s", v->uri);
    vrmVirtSetStatus(v, true, NULL);
    *fresh = true;
    return v->conn;
}

/* "<rdma:migration>" of the live definition: 1 present, 0 not, -1 error */
static int
vrmVirtGetMetadata(virDomainPtr dom, char **xml)
{
    virErrorPtr err;

    if ((*xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
                                     VRM_XML_NS_MIGRATION,
                                     VIR_DOMAIN_AFFECT_LIVE)))
        return 1;
    err = virGetLastError();
    if (err && err->code == VIR_ERR_NO_DOMAIN_METADATA)
        return 0;
    return -1;
}

/* The disks QEMU may copy over NBD (--copy-storage-all): the live
 * definition (no libvirt job needed to read it); unknown counts as none */
static void
vrmVirtCountDisks(virDomainPtr dom, vrmDomainFacts *facts)
{
    g_autofree char *xml = virDomainGetXMLDesc(dom, 0);

    if (!xml || vrmDomainXMLCountCopyDisks(xml, &facts->disks) < 0)
        VRM_DEBUG("domain %s: its disks could not be counted: %s", facts->name,
                  xml ? vrmGetLastErrorMessage() : virGetLastErrorMessage());
}

/* The <job> of libvirt's status XML: async job and its flags */
static void
vrmVirtStatusJob(const char *name, vrmDomainFacts *facts, bool *migratingOut)
{
    g_autofree char *path = g_strdup_printf(VRM_LIBVIRT_QEMU_STATE_DIR "/%s.xml", name);
    g_autoptr(xmlDoc) doc = NULL;
    g_autoptr(xmlXPathContext) ctxt = NULL;
    xmlXPathObjectPtr obj;
    g_autofree char *async = NULL;
    g_autofree char *flags = NULL;

    *migratingOut = false;
    if (strchr(name, '/') || !(doc = vrmXMLParseFile(path, "libvirt status XML")) ||
        !(ctxt = vrmXMLNewContext(doc))) {
        vrmResetLastError();
        return;
    }
    obj = xmlXPathEvalExpression(BAD_CAST "string(/domstatus/job/@async)", ctxt);
    if (obj && obj->stringval)
        async = g_strdup((const char *)obj->stringval);
    xmlXPathFreeObject(obj);
    obj = xmlXPathEvalExpression(BAD_CAST "string(/domstatus/job/@flags)", ctxt);
    if (obj && obj->stringval)
        flags = g_strdup((const char *)obj->stringval);
    xmlXPathFreeObject(obj);
    if (g_strcmp0(async, "migration out") != 0)
        return;
    *migratingOut = true;
    if (flags && *flags) {
        guint64 v = g_ascii_strtoull(flags, NULL, 0);

        facts->knowFlags = true;
        facts->pinAllFlag = (v & VRM_VIRT_FLAG_PIN_ALL) != 0;
    }
}

/* /proc/PID/cmdline carries "-uuid UUID" */
static bool
vrmVirtIsQemuOf(long long pid, const char *uuid)
{
    g_autofree char *path = g_strdup_printf("/proc/%lld/cmdline", pid);
    g_autofree char *data = NULL;
    gsize len = 0;
    gsize off;
    bool next = false;

    if (!g_file_get_contents(path, &data, &len, NULL))
        return false;
    for (off = 0; off < len; off += strlen(data + off) + 1) {
        if (next)
            return g_ascii_strcasecmp(data + off, uuid) == 0;
        next = g_str_equal(data + off, "-uuid");
    }
    return false;
}

static long long
vrmVirtProcUid(long long pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%lld/status", pid);
    g_autofree char *data = NULL;
    const char *line;

    if (!g_file_get_contents(path, &data, NULL, NULL) ||
        !(line = strstr(data, "\nUid:")))
        return -1;
    return g_ascii_strtoll(line + 5, NULL, 10);
}

/*
 * The QEMU process of a domain, known only through libvirt: the pid file
 * libvirt (root) writes, confirmed by the command line (a stale file names
 * another process). No search of /proc: any process can put "-uuid UUID"
 * into its arguments (issue 33 item 5). Unknown: -1, and the caller uses
 * the host's QEMU user.
 */
static void
vrmVirtQemuProcess(const char *name, const char *uuid, vrmDomainFacts *facts)
{
    g_autofree char *path = g_strdup_printf(VRM_LIBVIRT_QEMU_STATE_DIR "/%s.pid", name);
    g_autofree char *data = NULL;
    long long pid;

    facts->qemuPid = facts->qemuUid = -1;
    if (!strchr(name, '/') && g_file_get_contents(path, &data, NULL, NULL) &&
        (pid = g_ascii_strtoll(data, NULL, 10)) > 0 && vrmVirtIsQemuOf(pid, uuid)) {
        facts->qemuPid = pid;
        facts->qemuUid = vrmVirtProcUid(pid);
        return;
    }
    VRM_DEBUG("domain %s: libvirt's pid file %s names no QEMU of it", name, path);
}

static void
vrmVirtDomainFacts(vrmHelperVirt *v, virConnectPtr conn, vrmDomainFacts *facts)
{
    virDomainPtr dom;
    virTypedParameterPtr params = NULL;
    int nparams = 0;
    int type = VIR_DOMAIN_JOB_NONE;
    g_autofree char *xml = NULL;
    bool statusOut = false;
    int rc;

    facts->operation = -1;
    facts->qemuPid = facts->qemuUid = -1;
    if (!(dom = virDomainLookupByUUIDString(conn, facts->uuid))) {
        virErrorPtr err = virGetLastError();

        if (!err || err->code != VIR_ERR_NO_DOMAIN)
            facts->error = g_strdup(virGetLastErrorMessage());
        return;
    }
    facts->found = true;
    facts->name = g_strdup(virDomainGetName(dom));
    facts->active = virDomainIsActive(dom) == 1;
    if (facts->active) {
        int state, reason;

        if (virDomainGetState(dom, &state, &reason, 0) == 0) {
            facts->postcopyFailed = state == VIR_DOMAIN_PAUSED &&
                reason == VIR_DOMAIN_PAUSED_POSTCOPY_FAILED;
            facts->incomingPostcopyFailed = state == VIR_DOMAIN_RUNNING &&
                reason == VIR_DOMAIN_RUNNING_POSTCOPY_FAILED;
        }
    }
    if (virDomainGetJobStats(dom, &type, &params, &nparams, 0) == 0) {
        int op;

        facts->jobType = type;
        if (virTypedParamsGetInt(params, nparams, VIR_DOMAIN_JOB_OPERATION, &op) == 1)
            facts->operation = op;
        virTypedParamsFree(params, nparams);
    }
    vrmVirtStatusJob(facts->name, facts, &statusOut);
    if (facts->operation >= 0)
        facts->migratingOut = type != VIR_DOMAIN_JOB_NONE &&
            facts->operation == VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT;
    else
        facts->migratingOut = statusOut;
    if ((rc = vrmVirtGetMetadata(dom, &xml)) < 0) {
        facts->error = g_strdup(virGetLastErrorMessage());
    } else if (rc > 0) {
        facts->rdmaEnabled = true;
        if (!(facts->def = vrmMigrationDefParseMetadata(xml)))
            facts->defError = g_strdup(vrmGetLastErrorMessage());
    }
    if (facts->active)
        vrmVirtQemuProcess(facts->name, facts->uuid, facts);
    vrmVirtCountDisks(dom, facts);
    virDomainFree(dom);
}

static void
vrmVirtOutcome(virConnectPtr conn, vrmVirtTask *task)
{
    virDomainPtr dom;
    virTypedParameterPtr params = NULL;
    int nparams = 0;
    int type = VIR_DOMAIN_JOB_NONE;
    int state = VIR_DOMAIN_NOSTATE;
    int reason = 0;

    if (!(dom = virDomainLookupByUUIDString(conn, task->uuid))) {
        virErrorPtr err = virGetLastError();

        if (err && err->code == VIR_ERR_NO_DOMAIN) {
            task->outcome = vrmMigrationOutcome(false, 0, 0, 0);
            return;
        }
        task->outcome = VRM_OUTCOME_UNKNOWN;
        task->detail = g_strdup(virGetLastErrorMessage());
        return;
    }
    if (virDomainGetState(dom, &state, &reason, 0) < 0) {
        task->outcome = VRM_OUTCOME_UNKNOWN;
        task->detail = g_strdup(virGetLastErrorMessage());
        virDomainFree(dom);
        return;
    }
    if (virDomainGetJobStats(dom, &type, &params, &nparams, 0) == 0)
        virTypedParamsFree(params, nparams);
    task->outcome = vrmMigrationOutcome(true, state, reason, type);
    task->detail = g_strdup_printf("state %d reason %d job %d", state, reason, type);
    virDomainFree(dom);
}

bool
vrmDomainFactsSettled(const vrmDomainFacts *f)
{
    return f->found && f->active && f->jobType == VIR_DOMAIN_JOB_NONE;
}

/* Keep our locator in a running RDMA-enabled domain's live metadata; with
 * [migration] rdma = all, every running domain is one (the live metadata
 * then says so, and goes with the domain) */
static void
vrmVirtEnsureLocator(vrmHelperVirt *v, virDomainPtr dom)
{
    g_autofree char *xml = NULL;
    g_autofree char *text = NULL;
    g_autoptr(vrmMigrationDef) def = NULL;
    virTypedParameterPtr params = NULL;
    int nparams = 0;
    int type = VIR_DOMAIN_JOB_NONE;
    int rc;

    if (!v->locator || virDomainIsActive(dom) != 1 ||
        (rc = vrmVirtGetMetadata(dom, &xml)) < 0 || (rc == 0 && !v->tagAll))
        return;
    if (rc == 0) {
        def = vrmMigrationDefNew();
    } else if (!(def = vrmMigrationDefParseMetadata(xml))) {
        VRM_WARN_LIMITED(&v->log, _("domain %1$s: its virt-rdma metadata is invalid: %2$s"),
                         virDomainGetName(dom), vrmGetLastErrorMessage());
        return;
    }
    if (def->disabled)
        return;
    /* set only when different: our own change comes back as an event */
    if (vrmLocatorEqual(def->locator, v->locator) && !def->offer && !def->answer)
        return;
    /* never during a job: libvirt would hold the call for its state lock */
    if (virDomainGetJobStats(dom, &type, &params, &nparams, 0) == 0)
        virTypedParamsFree(params, nparams);
    if (type != VIR_DOMAIN_JOB_NONE)
        return;
    vrmLocatorFree(def->locator);
    def->locator = vrmLocatorCopy(v->locator);
    g_clear_pointer(&def->offer, vrmOfferFree);
    g_clear_pointer(&def->answer, vrmAnswerFree);
    text = vrmMigrationDefFormatMetadata(def);
    if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, text,
                             VRM_XML_NS_PREFIX, VRM_XML_NS_MIGRATION,
                             VIR_DOMAIN_AFFECT_LIVE) < 0) {
        /* copied first: any libvirt call resets the message */
        g_autofree char *why = g_strdup(virGetLastErrorMessage());

        VRM_WARN_LIMITED(&v->log, _("domain %1$s: cannot set its virt-rdma locator: %2$s"),
                         virDomainGetName(dom), why);
        return;
    }
    VRM_INFO("domain %s: locator %s %s:%u", virDomainGetName(dom), v->locator->host,
             v->locator->address, v->locator->port);
}

static void
vrmVirtLocatorAll(vrmHelperVirt *v, virConnectPtr conn)
{
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    int i;

    for (i = 0; i < n; i++) {
        vrmVirtEnsureLocator(v, doms[i]);
        virDomainFree(doms[i]);
    }
    g_free(doms);
}

static gboolean
vrmVirtDeliver(gpointer opaque)
{
    vrmVirtTask *task = opaque;

    if (task->type == VRM_VIRT_TASK_DOMAIN)
        task->factsDone(g_steal_pointer(&task->facts), task->opaque);
    else
        task->outcomeDone(task->outcome, task->detail, task->opaque);
    vrmVirtTaskFree(task);
    return G_SOURCE_REMOVE;
}

/* To the creator's context, always as a source of its own: never called
 * here in the worker (g_main_context_invoke() would, whenever the worker
 * manages to acquire that context) */
static void
vrmVirtDeliverLater(vrmHelperVirt *v, vrmVirtTask *task)
{
    GSource *src = g_idle_source_new();

    g_source_set_callback(src, vrmVirtDeliver, task, NULL);
    g_source_attach(src, v->context);
    g_source_unref(src);
}

static void
vrmVirtRun(vrmHelperVirt *v, vrmVirtTask *task)
{
    bool fresh = false;
    virConnectPtr conn = vrmVirtConnect(v, &fresh);
    g_autofree char *why = NULL;

    if (!conn) {
        g_mutex_lock(&v->lock);
        why = g_strdup(v->error);
        g_mutex_unlock(&v->lock);
    }
    if (fresh)
        vrmVirtLocatorAll(v, conn);
    switch (task->type) {
    case VRM_VIRT_TASK_DOMAIN:
        task->facts = g_new0(vrmDomainFacts, 1);
        task->facts->uuid = g_strdup(task->uuid);
        if (conn)
            vrmVirtDomainFacts(v, conn, task->facts);
        else
            task->facts->error = g_steal_pointer(&why);
        break;
    case VRM_VIRT_TASK_OUTCOME:
        if (conn) {
            vrmVirtOutcome(conn, task);
        } else {
            task->outcome = VRM_OUTCOME_UNKNOWN;
            task->detail = g_steal_pointer(&why);
        }
        break;
    case VRM_VIRT_TASK_LOCATOR:
        if (conn) {
            virDomainPtr dom = virDomainLookupByUUIDString(conn, task->uuid);

            if (dom) {
                vrmVirtEnsureLocator(v, dom);
                virDomainFree(dom);
            }
        }
        vrmVirtTaskFree(task);
        return;
    case VRM_VIRT_TASK_LOCATOR_ALL:
        if (conn && !fresh)
            vrmVirtLocatorAll(v, conn);
        vrmVirtTaskFree(task);
        return;
    case VRM_VIRT_TASK_STOP:
        vrmVirtTaskFree(task);
        return;
    }
    vrmVirtDeliverLater(v, task);
}

static gpointer
vrmVirtWorker(gpointer opaque)
{
    vrmHelperVirt *v = opaque;

    for (;;) {
        vrmVirtTask *task = g_async_queue_timeout_pop(v->queue,
                                                      (guint64)VRM_VIRT_RETRY_MS * 1000);
        bool fresh;

        if (!task) {
            /* idle: (re)connect, which refreshes every locator */
            if (vrmVirtConnect(v, &fresh) && fresh)
                vrmVirtLocatorAll(v, v->conn);
            continue;
        }
        if (task->type == VRM_VIRT_TASK_STOP) {
            vrmVirtTaskFree(task);
            break;
        }
        vrmResetLastError();
        vrmVirtRun(v, task);
    }
    vrmVirtDisconnect(v);
    return NULL;
}

vrmHelperVirt *
vrmHelperVirtNew(const char *uri, const vrmLocator *locator, bool tagAll)
{
    vrmHelperVirt *v = g_new0(vrmHelperVirt, 1);
    vrmRateLimit rl = VRM_RATE_LIMIT_INIT(3, 300);

    /* libxml2's globals before a second thread uses it (libvirt parses in
     * the worker): two threads initialising them at once lose one */
    xmlInitParser();
    vrmVirtEventsStart();
    v->uri = g_strdup(uri);
    v->context = g_main_context_ref_thread_default();
    v->locator = vrmLocatorCopy(locator);
    v->tagAll = tagAll;
    v->queue = g_async_queue_new();
    v->callbacks[0] = v->callbacks[1] = -1;
    v->log = rl;
    g_mutex_init(&v->lock);
    v->error = g_strdup(_("not connected yet"));
    /* connect now, and put the locators in place */
    vrmVirtPush(v, VRM_VIRT_TASK_LOCATOR_ALL, NULL);
    v->worker = g_thread_new("libvirt-worker", vrmVirtWorker, v);
    return v;
}

void
vrmHelperVirtFree(vrmHelperVirt *v)
{
    vrmVirtTask *task;

    if (!v)
        return;
    vrmVirtPush(v, VRM_VIRT_TASK_STOP, NULL);
    g_thread_join(v->worker);
    while ((task = g_async_queue_try_pop(v->queue)))
        vrmVirtTaskFree(task);
    g_async_queue_unref(v->queue);
    /* results already on their way to the main loop keep only their task */
    vrmLocatorFree(v->locator);
    g_main_context_unref(v->context);
    g_free(v->uri);
    g_free(v->error);
    g_mutex_clear(&v->lock);
    g_free(v);
}

void
vrmHelperVirtOnPostcopyFailed(vrmHelperVirt *v, vrmPostcopyFailedFunc func,
                              gpointer opaque)
{
    v->postcopyFailed = func;
    v->postcopyFailedOpaque = opaque;
}

bool
vrmHelperVirtStatus(vrmHelperVirt *v, char **message)
{
    bool ok;

    g_mutex_lock(&v->lock);
    ok = v->connected;
    *message = g_strdup(v->error);
    g_mutex_unlock(&v->lock);
    return ok;
}

void
vrmHelperVirtQueryDomain(vrmHelperVirt *v, const char *uuid,
                         vrmDomainFactsFunc done, gpointer opaque)
{
    vrmVirtPushTask(v, VRM_VIRT_TASK_DOMAIN, uuid, done, NULL, opaque);
}

void
vrmHelperVirtQueryOutcome(vrmHelperVirt *v, const char *uuid,
                          vrmOutcomeFunc done, gpointer opaque)
{
    vrmVirtPushTask(v, VRM_VIRT_TASK_OUTCOME, uuid, NULL, done, opaque);
}

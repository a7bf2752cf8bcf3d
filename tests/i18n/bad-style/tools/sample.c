/* A sample for negative-message-style.sh: two messages break libvirt's
 * message style, the others keep to it or are exempt. */
#include <glib/gi18n.h>

static const char *const messages[] = {
    N_("Cannot open the socket"),               /* capital: reported */
    N_("the peer closed the channel."),         /* period: reported */
    N_("RDMA device %1$s failed"),              /* an acronym: fine */
    N_("QEMU's socket was closed"),             /* a possessive acronym: fine */
    N_("IPv4 addresses only"),                  /* allowed: fine */
    N_("N"),                                    /* an option placeholder: fine */
    N_("stopped after 3 tries..."),             /* an ellipsis: fine */
    /* message-style: exempt-begin: a label as virsh prints it */
    N_("Job type:"),
    /* message-style: exempt-end */
};

static void
usage(GOptionContext *ctx)
{
    g_option_context_set_summary(ctx,
        _("Live migration over RDMA. A summary, GLib-style."));
}
